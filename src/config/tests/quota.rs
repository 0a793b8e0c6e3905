//! `[[quota]]`: rates read in their units, `who` and the items as `[[policy]]` writes them,
//! and every mistake named with its key.

use std::time::Duration;

use super::{load, problems};

#[test]
fn quotas_are_read_with_their_limits() {
    let config = load(
        "q.toml",
        "[[quota]]\nname = \"gh\"\nwho = { groups = [\"eng\"] }\nupstreams = [\"github\"]\n\
         rate = \"30/minute\"\ndaily = 1000\nmonthly = 20000\nconcurrent = 4\n\n\
         [[quota]]\nname = \"all.writes\"\nper = \"everyone\"\ntools = [\"*:create_*\"]\nrate = \"5/s\"\n",
    )
    .unwrap();
    let [gh, all] = &config.quotas[..] else {
        panic!("{:?}", config.quotas)
    };
    assert_eq!(&*gh.name, "gh");
    assert_eq!(gh.rate, Some((30, Duration::from_secs(60))));
    assert_eq!(
        (gh.daily, gh.monthly, gh.concurrent),
        (Some(1000), Some(20000), Some(4))
    );
    assert!(!gh.shared);
    assert_eq!(all.rate, Some((5, Duration::from_secs(1))));
    assert!(all.shared);
}

#[test]
fn quota_mistakes_are_named() {
    let found = problems(
        "q.toml",
        "[[quota]]\nrate = \"30/minute\"\n\n\
         [[quota]]\nname = \"a\"\nrate = \"lots\"\n\n\
         [[quota]]\nname = \"a\"\ndaily = 0\nconcurrent = 0\nper = \"team\"\n\n\
         [[quota]]\nname = \"b\"\ntools = [\"no-colon\"]\n",
    );
    for (key, says) in [
        ("quota[0].name", "is needed"),
        ("quota[1].rate", "is not a rate"),
        ("quota[2].name", "names two quotas"),
        ("quota[2].daily", "at least 1"),
        ("quota[2].concurrent", "at least 1"),
        ("quota[2].per", "everyone"),
        ("quota[3]", "sets no limit"),
        ("quota[3].tools", "UPSTREAM:NAME"),
    ] {
        assert!(
            found.iter().any(|p| p.contains(key) && p.contains(says)),
            "{key}: {says}: {found:#?}"
        );
    }
}
