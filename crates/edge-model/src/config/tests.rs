use super::*;
use serde_json::json;

fn base() -> serde_json::Value {
    json!({
        "hidden_size": 64, "num_hidden_layers": 4, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "vocab_size": 256, "eos_token_id": 1,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25}
    })
}

fn err_of(v: serde_json::Value) -> String {
    Qwen35Config::from_json(&v, None).unwrap_err().to_string()
}

#[test]
fn parses_plain_config_with_defaults() {
    let c = Qwen35Config::from_json(&base(), None).unwrap();
    assert_eq!(c.layer_types[3], LayerType::FullAttention);
    assert_eq!(c.layer_types[0], LayerType::LinearAttention);
    assert_eq!(c.rotary_dim(), 8);
    assert_eq!(c.rope_theta, 1e6);
    assert_eq!(c.linear_conv_kernel_dim, 4);
    assert_eq!(c.eos_token_ids, vec![1]);
    assert_eq!(c.linear_conv_channels(), 2 * 32 + 64);
    assert!(!c.tie_word_embeddings);
}

#[test]
fn reads_text_config_and_generation_eos() {
    let root = json!({"model_type": "qwen3_5", "tie_word_embeddings": true, "text_config": base()});
    let gen_cfg = json!({"eos_token_id": [2, 1]});
    let c = Qwen35Config::from_json(&root, Some(&gen_cfg)).unwrap();
    assert!(c.tie_word_embeddings);
    assert_eq!(c.eos_token_ids, vec![2, 1]);
}

#[test]
fn legacy_rope_and_interval() {
    let mut v = base();
    let o = v.as_object_mut().unwrap();
    o.remove("rope_parameters");
    o.insert("rope_theta".into(), json!(5000.0));
    o.insert("full_attention_interval".into(), json!(2));
    let c = Qwen35Config::from_json(&v, None).unwrap();
    assert_eq!(c.rope_theta, 5000.0);
    assert_eq!(c.partial_rotary_factor, 0.25);
    assert_eq!(c.layer_types[1], LayerType::FullAttention);
    assert_eq!(c.num_full_attention_layers(), 2);
}

#[test]
fn errors_name_the_field() {
    let mut v = base();
    v.as_object_mut().unwrap().remove("hidden_size");
    assert!(err_of(v).contains("`hidden_size`: is missing"));

    let mut v = base();
    v["num_key_value_heads"] = json!(3);
    assert!(err_of(v).contains("num_attention_heads"));

    let mut v = base();
    v["linear_num_value_heads"] = json!(5);
    assert!(err_of(v).contains("linear_num_value_heads"));

    let mut v = base();
    v["layer_types"] = json!([
        "linear_attention",
        "mamba",
        "linear_attention",
        "full_attention"
    ]);
    assert!(err_of(v).contains("layer_types[1]"));

    let mut v = base();
    v["layer_types"] = json!(["full_attention"]);
    assert!(err_of(v).contains("has 1 entries"));

    let mut v = base();
    v["vocab_size"] = json!("big");
    assert!(err_of(v).contains("`vocab_size`: expected a non-negative integer"));

    let mut v = base();
    v["rope_parameters"]["rope_type"] = json!("yarn");
    assert!(err_of(v).contains("yarn"));

    let mut v = base();
    v["eos_token_id"] = json!(999);
    assert!(err_of(v).contains("outside the vocabulary"));

    let root = json!({"text_config": base(), "x": 1});
    let bad_gen = json!({"eos_token_id": "x"});
    let e = Qwen35Config::from_json(&root, Some(&bad_gen))
        .unwrap_err()
        .to_string();
    assert!(e.contains("generation_config.eos_token_id"), "{e}");
}

#[test]
fn state_sizes_for_27b() {
    // Qwen3.6-27B: 16 full layers × 4 KV heads × 256 × 2 (K, V) × 2 bytes = 64 KiB.
    let mut v = base();
    let o = v.as_object_mut().unwrap();
    for (k, n) in [
        ("hidden_size", 5120),
        ("num_hidden_layers", 64),
        ("num_attention_heads", 24),
        ("num_key_value_heads", 4),
        ("head_dim", 256),
        ("linear_num_key_heads", 16),
        ("linear_num_value_heads", 48),
        ("linear_key_head_dim", 128),
        ("linear_value_head_dim", 128),
        ("vocab_size", 248320),
    ] {
        o.insert(k.into(), json!(n));
    }
    let c = Qwen35Config::from_json(&v, None).unwrap();
    assert_eq!(c.kv_bytes_per_token(2), 64 * 1024);
    assert_eq!(c.rotary_dim(), 64);
    // 48 GDN layers × 3 MiB of f32 state, plus conv state.
    assert!(c.recurrent_state_bytes() > 48 * 3 * 1024 * 1024);
}
