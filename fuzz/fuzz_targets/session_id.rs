//! Sealed session ids: whatever a client sends as `Mcp-Session-Id` opens to nothing or to a
//! ticket this key sealed; never a panic. A ticket sealed here opens to itself.
#![no_main]

use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use switchyard::{session::SessionIds, store::Sealer};

static IDS: LazyLock<SessionIds> =
    LazyLock::new(|| SessionIds::new(Arc::new(Sealer::new(&[[7u8; 32], [9u8; 32]]))));

fuzz_target!(|id: &str| {
    if let Some(ticket) = IDS.open(id) {
        // Only a sealed ticket opens; sealing it again yields one that opens the same.
        let again = IDS.mint(&ticket);
        let reopened = IDS.open(&again).expect("a minted id opens");
        assert_eq!(reopened.principal, ticket.principal);
    }
});
