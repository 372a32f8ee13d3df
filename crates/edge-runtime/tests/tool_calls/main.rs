//! Tool-call parsing end to end: the demo model's template and output, and property
//! tests over generated replies and arbitrary text, for calls held back until complete
//! ([`parsing`]) and for calls streamed as they are written ([`streamed`]).

mod generate;
mod parsing;
mod streamed;
