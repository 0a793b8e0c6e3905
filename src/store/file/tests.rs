//! The embedded store's file: what it keeps, for how long, and what a second process sees.

use std::time::Duration;

use super::*;

fn hashes(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

#[tokio::test]
async fn sessions_live_until_their_time_and_end_with_all_they_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = StoreFile::new(dir.path().join("sessions.redb"));
    file.renew(hashes(&["a", "b"]), Duration::from_secs(60))
        .await
        .unwrap();
    file.renew(hashes(&["gone"]), Duration::from_millis(1))
        .await
        .unwrap();
    file.append("a".into(), b"one".to_vec()).await.unwrap();
    file.set_seen("a".into(), "1-0".into()).await.unwrap();
    let put = file.put_record(
        Records::Upstreams,
        "a".into(),
        "up".into(),
        b"x".to_vec(),
        false,
        None,
    );
    assert!(put.await.unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    let alive = file.alive(hashes(&["a", "b", "gone", "never"])).await;
    assert_eq!(alive.unwrap(), [true, true, false, false]);

    file.end("a".into()).await.unwrap();
    assert_eq!(file.alive(hashes(&["a"])).await.unwrap(), [false]);
    assert!(
        file.events_after("a".into(), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(file.seen("a".into()).await.unwrap(), None);
    let record = file.record(Records::Upstreams, "a".into(), "up".into());
    assert_eq!(record.await.unwrap(), None);

    // The sweep removes the expired session; `b` stays.
    file.append("gone".into(), b"left".to_vec()).await.unwrap();
    assert_eq!(file.sweep().await.unwrap(), 1);
    assert!(
        file.events_after("gone".into(), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(file.alive(hashes(&["b"])).await.unwrap(), [true]);
}

#[tokio::test]
async fn events_come_back_in_order_after_an_id_and_only_the_last_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = StoreFile::new(dir.path().join("sessions.redb"));
    for n in 0..EVENTS_KEPT + 5 {
        file.append("s".into(), n.to_string().into_bytes())
            .await
            .unwrap();
    }
    file.append("other".into(), b"x".to_vec()).await.unwrap();
    let all = file.events_after("s".into(), None).await.unwrap();
    assert_eq!(all.len(), EVENTS_KEPT);
    assert_eq!(all[0].1, b"5");
    assert!(all.iter().all(|(id, _)| crate::store::is_event_id(id)));
    let (tenth, _) = &all[9];
    let after = file
        .events_after("s".into(), Some(tenth.clone()))
        .await
        .unwrap();
    assert_eq!(after.len(), EVENTS_KEPT - 10);
    assert_eq!(after[0].1, b"15");
    // An id this store never gave: everything kept.
    let unknown = file.events_after("s".into(), Some("nonsense".into())).await;
    assert_eq!(unknown.unwrap().len(), EVENTS_KEPT);
}

#[tokio::test]
async fn records_are_written_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let file = StoreFile::new(dir.path().join("sessions.redb"));
    let put = |field: &str, value: &[u8], replace, expected: Option<&[u8]>| {
        file.put_record(
            Records::Subscriptions,
            "s".into(),
            field.into(),
            value.to_vec(),
            replace,
            expected.map(<[u8]>::to_vec),
        )
    };
    assert!(put("u1", b"first", false, None).await.unwrap());
    assert!(
        !put("u1", b"second", false, None).await.unwrap(),
        "not over a record"
    );
    assert!(
        !put("u1", b"third", true, Some(b"stale")).await.unwrap(),
        "not over another"
    );
    assert!(put("u1", b"fourth", true, Some(b"first")).await.unwrap());
    assert!(put("u2", b"other", true, None).await.unwrap());
    file.put_record(
        Records::Subscriptions,
        "t".into(),
        "u1".into(),
        b"t's".to_vec(),
        true,
        None,
    )
    .await
    .unwrap();
    let mut mine = file
        .records(Records::Subscriptions, "s".into())
        .await
        .unwrap();
    mine.sort();
    assert_eq!(mine, [b"fourth".to_vec(), b"other".to_vec()]);
    file.remove_record(Records::Subscriptions, "s".into(), "u1".into())
        .await
        .unwrap();
    let left = file
        .records(Records::Subscriptions, "s".into())
        .await
        .unwrap();
    assert_eq!(left, [b"other".to_vec()]);
}

#[tokio::test]
async fn one_process_at_a_time_and_the_next_reads_what_was_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.redb");
    let first = StoreFile::new(path.clone());
    first
        .renew(hashes(&["kept"]), Duration::from_secs(60))
        .await
        .unwrap();
    first
        .append("kept".into(), b"event".to_vec())
        .await
        .unwrap();

    let second = StoreFile::new(path.clone());
    let refused = second.open().await.unwrap_err().to_string();
    assert!(
        refused.contains("in use by another Switchyard process"),
        "{refused}"
    );

    first.release(true).await.unwrap();
    assert!(first.open().await.is_err(), "released for good");
    // The second tried a moment ago: it tries again once the pause is over.
    tokio::time::sleep(REOPEN_AFTER).await;
    assert_eq!(second.alive(hashes(&["kept"])).await.unwrap(), [true]);
    let events = second.events_after("kept".into(), None).await.unwrap();
    assert_eq!(events.len(), 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn event_ids_round_trip_and_follow_the_clock() {
    let sequence = now_millis() << LOW_BITS | 7;
    let id = event_id(sequence);
    assert!(id.starts_with(&now_millis().to_string()[..6]), "{id}");
    assert_eq!(parse_event_id(&id), Some(sequence));
    assert_eq!(parse_event_id("1-2-3"), None);
    assert_eq!(parse_event_id(&format!("1-{}", 1u64 << LOW_BITS)), None);
}
