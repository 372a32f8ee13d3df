//! Calibration: run prompts through the unquantized model and record, per linear, the
//! largest input magnitude, and per attention layer the largest key and value.

use super::writer::CalibrationScales;
use crate::batch::LogitRows;
use crate::model::Qwen35Model;
use crate::session::Session;
use crate::weights::ActivationMode;
use crate::{ModelError, Result};
use edge_kvcache::CacheConfig;
use edge_quant::linear::AmaxObserver;
use std::path::Path;
use std::sync::Arc;

/// Runs every prompt (each on a fresh state) through the model in `dir` and returns the
/// observed maxima.
pub fn calibrate(dir: &Path, prompts: &[Vec<u32>]) -> Result<CalibrationScales> {
    if prompts.iter().all(|p| p.is_empty()) {
        return Err(ModelError::NoCalibrationPrompts);
    }
    let mut model = Qwen35Model::load(dir, ActivationMode::None)?;
    let linears: Vec<(String, Arc<AmaxObserver>)> = model
        .layer_linears_mut()
        .into_iter()
        .map(|(name, l)| {
            let obs = Arc::new(AmaxObserver::new());
            l.set_input_observer(Some(obs.clone()));
            (name, obs)
        })
        .collect();
    let kv: Vec<(String, crate::backend::KvObserver)> = model
        .attention_mut()
        .into_iter()
        .map(|(name, a)| {
            let obs = crate::backend::KvObserver::default();
            a.kv_observer = Some(obs.clone());
            (name, obs)
        })
        .collect();
    for prompt in prompts.iter().filter(|p| !p.is_empty()) {
        Session::new(&model, CacheConfig::default())?.forward(prompt, LogitRows::Last)?;
    }
    Ok(CalibrationScales {
        input_amax: linears.into_iter().map(|(n, o)| (n, o.amax())).collect(),
        k_amax: kv.iter().map(|(n, o)| (n.clone(), o.k.amax())).collect(),
        v_amax: kv.into_iter().map(|(n, o)| (n, o.v.amax())).collect(),
    })
}
