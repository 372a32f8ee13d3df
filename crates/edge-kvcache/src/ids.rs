//! Typed handles: a page (block) of KV rows, a recurrent-state slot, a sequence.

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The id with this index.
            pub fn new(index: usize) -> Self {
                $name(u32::try_from(index).expect("fewer than 2^32 ids"))
            }

            /// Its index (ids are dense from 0).
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id!(
    /// A page of `block_size` KV rows, the same page index in every attention layer.
    BlockId
);
id!(
    /// A slot holding one sequence's recurrent (Gated DeltaNet) state in every
    /// recurrent layer.
    SlotId
);
id!(
    /// A live sequence of a cache.
    SeqId
);
