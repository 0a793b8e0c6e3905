//! `[telemetry]`: off by default, the collector's URL completed, bad keys named, the
//! collector's headers kept out of debug output.

use super::{load, problems};

#[test]
fn telemetry_is_off_unless_a_collector_is_named() {
    let config = load("t.toml", "").unwrap();
    assert!(config.telemetry.traces_url.is_none());
    let config = load(
        "t.toml",
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n",
    )
    .unwrap();
    assert_eq!(
        config.telemetry.traces_url.unwrap().as_str(),
        "http://127.0.0.1:4318/v1/traces"
    );
    assert_eq!(config.telemetry.sampling_ratio, 1.0);
    assert_eq!(config.telemetry.service_name, "switchyard");
    let config = load("t.toml", 
        "[telemetry]\notlp_endpoint = \"https://otel.example/otlp/v1/traces\"\nsampling_ratio = 0.01\nservice_name = \"edge\"\n",
    ).unwrap();
    assert_eq!(
        config.telemetry.traces_url.unwrap().as_str(),
        "https://otel.example/otlp/v1/traces"
    );
    assert_eq!(config.telemetry.sampling_ratio, 0.01);
    assert_eq!(config.telemetry.service_name, "edge");
}

#[test]
fn bad_telemetry_settings_are_named() {
    let found = problems(
        "t.toml",
        "[telemetry]\notlp_endpoint = \"grpc://x\"\nsampling_ratio = 2.0\nservice_name = \" \"\nheaders = { \"bad header\" = \"x\" }\n",
    );
    for key in [
        "telemetry.otlp_endpoint",
        "telemetry.sampling_ratio",
        "telemetry.service_name",
        "telemetry.headers.bad header",
    ] {
        assert!(found.iter().any(|p| p.contains(key)), "{key}: {found:?}");
    }
    let found = problems("t.toml", "[telemetry]\nsampling_ratio = 0.5\n");
    assert!(
        found.iter().any(|p| p.contains("telemetry.otlp_endpoint")),
        "{found:?}"
    );
}

#[test]
fn collector_headers_stay_out_of_debug_output() {
    let config = load("t.toml", 
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\nheaders = { x-api-key = \"hush-0123456789\" }\n",
    ).unwrap();
    assert_eq!(config.telemetry.headers.len(), 1);
    let shown = format!("{:?}", config.telemetry);
    assert!(shown.contains("x-api-key"), "{shown}");
    assert!(!shown.contains("hush"), "{shown}");
}
