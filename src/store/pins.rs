//! The approved tool definitions of pinned upstreams (see `pins`), which replicas share and
//! which outlive the process: in the embedded store's file (a table of their own, never swept)
//! or in Redis (`PREFIX:pins:HASH`, HASH the upstream name's, a hash of (the tool name's hash
//! → sealed record)). Records are sealed, so a record altered in the store, or copied under
//! another upstream or tool, does not open: an approval cannot be forged by whoever can write
//! to Redis without the session keys.

use redis::AsyncCommands;

use super::{Store, StoreError, file::Records, record_hash, records::purpose, redis::failure};

/// The kind named in errors, in the purpose records are sealed for, and in change news.
pub const PIN_KIND: &str = "pin";

impl Store {
    /// Whether pins outlive the process here (the file, or Redis).
    pub fn keeps_pins(&self) -> bool {
        self.file.is_some() || self.redis.is_some()
    }

    /// Every pin record of `upstream`, opened (none without a file or Redis).
    pub async fn pins(&self, upstream: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        let sealed: Vec<(String, Vec<u8>)> = if let Some(file) = &self.file {
            self.health
                .of(file.fields(Records::Pins, upstream.to_owned()).await)?
        } else if let Some(redis) = &self.redis {
            let all: Vec<(String, Vec<u8>)> = self.health.of(redis
                .connection()
                .hgetall(pins_key(redis.prefix(), upstream))
                .await
                .map_err(failure(PIN_KIND)))?;
            all
        } else {
            return Ok(Vec::new());
        };
        sealed
            .into_iter()
            .map(|(field, sealed)| {
                // The field is the tool's hash: the record opens only under the key that names it.
                self.sealer
                    .open(&purpose(PIN_KIND, &sealed_key(upstream, &field)), &sealed)
                    .ok_or(StoreError::Unreadable {
                        kind: PIN_KIND,
                        reason: "it does not open with this replica's session keys (another \
                                 key, or altered)"
                            .into(),
                    })
            })
            .collect()
    }

    /// Writes `upstream`'s record for `tool`: replacing any (`replace`), or only if there is
    /// none. Whether it was written.
    pub async fn put_pin(
        &self,
        upstream: &str,
        tool: &str,
        plain: &[u8],
        replace: bool,
    ) -> Result<bool, StoreError> {
        let field = record_hash(tool);
        let sealed = self
            .sealer
            .seal(&purpose(PIN_KIND, &sealed_key(upstream, &field)), plain);
        if let Some(file) = &self.file {
            return self.health.of(file
                .put_record(
                    Records::Pins,
                    upstream.to_owned(),
                    field,
                    sealed,
                    replace,
                    None,
                )
                .await);
        }
        let Some(redis) = &self.redis else {
            return Ok(false);
        };
        let key = pins_key(redis.prefix(), upstream);
        let mut connection = redis.connection();
        let written = if replace {
            let _: i64 = connection
                .hset(key, field, sealed)
                .await
                .map_err(failure(PIN_KIND))?;
            true
        } else {
            connection
                .hset_nx(key, field, sealed)
                .await
                .map_err(failure(PIN_KIND))?
        };
        self.health.of(Ok(written))
    }
}

fn pins_key(prefix: &str, upstream: &str) -> String {
    format!("{prefix}:{PIN_KIND}s:{}", record_hash(upstream))
}

/// What a record is sealed under: the upstream and the tool's hash.
fn sealed_key(upstream: &str, tool_hash: &str) -> String {
    format!("{upstream} {tool_hash}")
}
