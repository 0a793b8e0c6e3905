//! The embedded store's record tables: what is kept by (session or upstream, record), sealed,
//! for the upstream sessions, subscriptions and found tools of a session, approved tool
//! definitions and the owners of tasks.

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use super::{FOUND, PINS, SUBSCRIPTIONS, StoreFile, TASK_OWNERS, UPSTREAMS};
use crate::{clock::now_millis, store::StoreError};

/// The tables keyed by (session or upstream, record).
#[derive(Clone, Copy)]
pub(in crate::store) enum Records {
    Upstreams,
    Subscriptions,
    /// The tools a session's client found with tool search (one record).
    Found,
    /// Approved tool definitions, by upstream (never swept: they belong to no session).
    Pins,
    /// Who created the tasks of upstreams without sessions, by upstream: each record begins
    /// with until when it is kept (see `put_expiring`).
    TaskOwners,
}

impl Records {
    /// The tables of records that belong to a session (and go with it).
    pub(super) const OF_SESSIONS: [Records; 3] =
        [Records::Upstreams, Records::Subscriptions, Records::Found];

    pub(super) fn table(
        self,
    ) -> TableDefinition<'static, (&'static str, &'static str), &'static [u8]> {
        match self {
            Records::Upstreams => UPSTREAMS,
            Records::Subscriptions => SUBSCRIPTIONS,
            Records::Found => FOUND,
            Records::Pins => PINS,
            Records::TaskOwners => TASK_OWNERS,
        }
    }
}

impl StoreFile {
    /// Session `hash`'s record `field` of `records`.
    pub(in crate::store) async fn record(
        &self,
        records: Records,
        hash: String,
        field: String,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.run(move |db| {
            let txn = db.begin_read()?;
            match txn.open_table(records.table()) {
                Ok(table) => Ok(table
                    .get((hash.as_str(), field.as_str()))?
                    .map(|value| value.value().to_vec())),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(error) => Err(error.into()),
            }
        })
        .await
    }

    /// Session `hash`'s records of `records`.
    pub(in crate::store) async fn records(
        &self,
        records: Records,
        hash: String,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let fields = self.fields(records, hash).await?;
        Ok(fields.into_iter().map(|(_, value)| value).collect())
    }

    /// The records of `records` under `hash`, each with its field.
    pub(in crate::store) async fn fields(
        &self,
        records: Records,
        hash: String,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.run(move |db| {
            let txn = db.begin_read()?;
            let table = match txn.open_table(records.table()) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(error) => return Err(error.into()),
            };
            table
                .range((hash.as_str(), "")..)?
                .map_while(|entry| match entry {
                    Ok((key, value)) => (key.value().0 == hash)
                        .then(|| Ok((key.value().1.to_owned(), value.value().to_vec()))),
                    Err(error) => Some(Err(error.into())),
                })
                .collect()
        })
        .await
    }

    /// Writes record `field` of `hash`, which is kept until the Unix time in milliseconds its
    /// first eight bytes hold (big-endian), and drops the records of `hash` kept no longer.
    pub(in crate::store) async fn put_expiring(
        &self,
        records: Records,
        hash: String,
        field: String,
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        let now = now_millis();
        self.write(move |txn| {
            let mut table = txn.open_table(records.table())?;
            let mut expired = Vec::new();
            for entry in table.range((hash.as_str(), "")..)? {
                let (key, kept) = entry?;
                if key.value().0 != hash {
                    break;
                }
                if expiring_until(kept.value()) <= now {
                    expired.push(key.value().1.to_owned());
                }
            }
            for old in &expired {
                table.remove((hash.as_str(), old.as_str()))?;
            }
            table.insert((hash.as_str(), field.as_str()), value.as_slice())?;
            Ok(())
        })
        .await
    }

    /// Writes session `hash`'s record `field`: always (`expected` none and `replace`), only
    /// if there is none (`replace` false), or only over `expected`. Whether it was written.
    pub(in crate::store) async fn put_record(
        &self,
        records: Records,
        hash: String,
        field: String,
        sealed: Vec<u8>,
        replace: bool,
        expected: Option<Vec<u8>>,
    ) -> Result<bool, StoreError> {
        self.write(move |txn| {
            let mut table = txn.open_table(records.table())?;
            let key = (hash.as_str(), field.as_str());
            let current = table.get(key)?.map(|value| value.value().to_vec());
            let allowed = match (&expected, &current) {
                (Some(expected), current) => current.as_ref() == Some(expected),
                (None, Some(_)) => replace,
                (None, None) => true,
            };
            if allowed {
                table.insert(key, sealed.as_slice())?;
            }
            Ok(allowed)
        })
        .await
    }

    pub(in crate::store) async fn remove_record(
        &self,
        records: Records,
        hash: String,
        field: String,
    ) -> Result<(), StoreError> {
        self.write(move |txn| {
            txn.open_table(records.table())?
                .remove((hash.as_str(), field.as_str()))?;
            Ok(())
        })
        .await
    }
}

/// Until when a record written by `put_expiring` is kept (Unix milliseconds).
pub(in crate::store) fn expiring_until(value: &[u8]) -> u64 {
    value
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}
