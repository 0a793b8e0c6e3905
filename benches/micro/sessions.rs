//! How long does a request take to find its session among 10,000 open ones (the id from its
//! `Mcp-Session-Id` header looked up, the session noted as active)?

use std::{hint::black_box, time::Duration};

use criterion::Criterion;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use switchyard::{
    catalog::ListVersions,
    policy::EndpointName,
    principal::Principal,
    session::{Session, SessionTable},
};
use tokio_util::sync::CancellationToken;

pub fn session_lookup(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _entered = runtime.enter();
    let metrics = switchyard::metrics::standalone();
    let memory = switchyard::config::StoreSettings {
        kind: switchyard::config::StoreKind::Memory,
        ..Default::default()
    };
    let store = switchyard::store::Store::new(&memory, std::path::Path::new("."), &metrics);
    let table = SessionTable::new(
        Duration::from_secs(3600),
        &metrics,
        store,
        CancellationToken::new(),
    );
    let client = InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("bench", "1"),
    );
    let ids: Vec<String> = (0..10_000).map(|i| format!("{i:032x}")).collect();
    for id in &ids {
        table.insert(Session::new(
            id.as_str().into(),
            (client.clone(), Default::default()),
            ProtocolVersion::V_2025_11_25,
            Principal::anonymous(),
            EndpointName::MAIN,
            table.now(),
            ListVersions::default(),
        ));
    }
    c.bench_function("sessions/lookup_among_10000", |b| {
        b.iter(|| black_box(table.get(black_box(&ids[4321]))))
    });
}
