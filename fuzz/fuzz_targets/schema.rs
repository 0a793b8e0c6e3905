//! A tool's input schema as an upstream lists it, and a call's arguments as a client sends
//! them (the text up to the first newline, and the rest): compiling the schema and checking
//! the arguments never panic, and each stays within the time and memory the run allows
//! (`-timeout`, `-rss_limit_mb`), whatever the schema's references and branches.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchyard::catalog::ArgumentCheck;

fuzz_target!(
    init: {
        // The harness's hook aborts at any panic, even one caught on purpose (`compile` catches
        // the validator's, which some schemas cause): the default hook, which only prints,
        // takes its place. A panic that escapes the gateway's code still aborts, in the
        // harness's own catch.
        drop(std::panic::take_hook());
    },
    |text: &str| {
        let (schema, arguments) = text.split_once('\n').unwrap_or((text, ""));
        let Ok(Value::Object(schema)) = serde_json::from_str::<Value>(schema) else {
            return;
        };
        let Ok(check) = ArgumentCheck::compile(&schema) else {
            return;
        };
        let arguments: Option<Value> = serde_json::from_str(arguments).ok();
        let _ = check.check(arguments.as_ref());
    }
);
