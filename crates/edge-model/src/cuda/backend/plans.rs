//! A pass's plan arrays on the device, uploaded once and read by every layer: the
//! attention rows (page tables, lengths, tree masks, store slots) and the Gated
//! DeltaNet spans. Every layer of a pass gets the same [`ForwardPlan`]; the first layer
//! to need an array uploads it and the others find it here. [`Mirror`] does the same
//! for a plain host array (the positions, the rotary frequencies).

use crate::Result;
use crate::attention_rows::AttentionRows;
use crate::backend::ForwardPlan;
use crate::cuda::{DeviceAttentionRows, GdnSpans};
use crate::gdn_rows::GdnRows;
use edge_core::cuda::DeviceElem;
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// The uploads of the last plan seen.
#[derive(Default)]
pub(super) struct PlanUploads {
    plan: Option<ForwardPlan>,
    attention: Option<DeviceAttentionRows>,
    gdn: Option<GdnSpans>,
}

impl PlanUploads {
    /// Forgets the uploads unless they are `plan`'s.
    fn select(&mut self, plan: &ForwardPlan) {
        if self.plan.as_ref() != Some(plan) {
            *self = PlanUploads {
                plan: Some(plan.clone()),
                ..PlanUploads::default()
            };
        }
    }

    /// The attention rows.
    pub(super) fn attention(
        &mut self,
        dev: &CudaDevice,
        plan: &ForwardPlan,
    ) -> Result<&DeviceAttentionRows> {
        self.select(plan);
        Ok(match &mut self.attention {
            Some(rows) => rows,
            empty => empty.insert(DeviceAttentionRows::upload(
                dev,
                AttentionRows::from_plan(plan)?,
            )?),
        })
    }

    /// The Gated DeltaNet spans.
    pub(super) fn gdn(&mut self, dev: &CudaDevice, plan: &ForwardPlan) -> Result<&GdnSpans> {
        self.select(plan);
        Ok(match &mut self.gdn {
            Some(spans) => spans,
            empty => empty.insert(GdnSpans::upload(dev, GdnRows::from_plan(plan)?)?),
        })
    }
}

/// A host array's device copy, uploaded again only when the array changes.
pub(super) struct Mirror<T: DeviceElem> {
    copy: Option<(Vec<T>, DeviceSlice<T>)>,
}

impl<T: DeviceElem + Clone + PartialEq> Mirror<T> {
    pub(super) fn new() -> Self {
        Mirror { copy: None }
    }

    /// The device copy of `host` (non-empty).
    pub(super) fn get(&mut self, dev: &CudaDevice, host: &[T]) -> Result<&DeviceSlice<T>> {
        if !matches!(&self.copy, Some((h, _)) if h.as_slice() == host) {
            self.copy = None;
        }
        Ok(match &mut self.copy {
            Some((_, copy)) => copy,
            empty => &empty.insert((host.to_vec(), dev.upload(host)?)).1,
        })
    }
}
