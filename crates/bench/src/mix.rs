//! What a run sends: the protocol era, the workload mix by weight and its even schedule, and
//! how a tool's answer is checked.

use std::{fmt, str::FromStr};

use serde::Serialize;

use super::BenchError;

/// Which protocol generation the load speaks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    Session,
    Stateless,
}

/// How a tool's answer is compared with the text sent.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EchoCheck {
    Exact,
    Contains,
    Off,
}

/// One kind of request in the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Call,
    List,
    Read,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Call, Kind::List, Kind::Read];

    /// The position of this kind in `ALL` (and in per-kind arrays).
    pub fn index(self) -> usize {
        match self {
            Kind::Call => 0,
            Kind::List => 1,
            Kind::Read => 2,
        }
    }

    pub fn method(self) -> &'static str {
        match self {
            Kind::Call => "tools/call",
            Kind::List => "tools/list",
            Kind::Read => "resources/read",
        }
    }
}

/// The workload by weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Mix {
    pub call: u32,
    pub list: u32,
    pub read: u32,
}

impl Mix {
    /// Only `tools/call`.
    pub const CALLS: Mix = Mix {
        call: 1,
        list: 0,
        read: 0,
    };
    /// Only `tools/list`.
    pub const LISTS: Mix = Mix {
        call: 0,
        list: 1,
        read: 0,
    };

    pub fn weight(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Call => self.call,
            Kind::List => self.list,
            Kind::Read => self.read,
        }
    }

    /// One cycle of the mix with each kind spread evenly (smooth weighted round robin), so
    /// `call=8,list=1,read=1` never sends its lists in a burst.
    pub fn schedule(&self) -> Vec<Kind> {
        let total: i64 = Kind::ALL.iter().map(|&k| i64::from(self.weight(k))).sum();
        let mut current = [0i64; 3];
        let mut cycle = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
        for _ in 0..total {
            for (slot, kind) in current.iter_mut().zip(Kind::ALL) {
                *slot += i64::from(self.weight(kind));
            }
            let (best, _) = current
                .iter()
                .enumerate()
                .max_by_key(|&(i, &v)| (v, std::cmp::Reverse(i)))
                .unwrap_or((0, &0));
            current[best] -= total;
            cycle.push(Kind::ALL[best]);
        }
        cycle
    }
}

impl FromStr for Mix {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<Self, BenchError> {
        let bad = |reason: String| BenchError::usage("--mix", reason);
        let mut mix = Mix {
            call: 0,
            list: 0,
            read: 0,
        };
        let mut seen = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part.split_once('=').unwrap_or((part, "1"));
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{weight}` is not a whole number in `{part}`")))?;
            if weight > 1000 {
                return Err(bad(format!("weight {weight} is over 1000 in `{part}`")));
            }
            let name = name.trim();
            let slot = match name {
                "call" => &mut mix.call,
                "list" => &mut mix.list,
                "read" => &mut mix.read,
                _ => return Err(bad(format!("unknown kind `{name}` (call, list or read)"))),
            };
            if seen.contains(&name) {
                return Err(bad(format!("`{name}` is given twice")));
            }
            seen.push(name);
            *slot = weight;
        }
        if mix.call + mix.list + mix.read == 0 {
            return Err(bad(format!("`{text}` sends nothing")));
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            ("call", self.call),
            ("list", self.list),
            ("read", self.read),
        ]
        .iter()
        .filter(|(_, w)| *w > 0)
        .map(|(n, w)| format!("{n}={w}"))
        .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_know_their_place() {
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
    }

    #[test]
    fn mixes_parse_and_spread() {
        let mix: Mix = "call=8, list=1,read=1".parse().unwrap();
        assert_eq!(
            mix,
            Mix {
                call: 8,
                list: 1,
                read: 1
            }
        );
        let cycle = mix.schedule();
        assert_eq!(cycle.len(), 10);
        assert_eq!(cycle.iter().filter(|&&k| k == Kind::List).count(), 1);
        let at = |kind| cycle.iter().position(|&k| k == kind).unwrap();
        assert!(
            at(Kind::List).abs_diff(at(Kind::Read)) >= 3,
            "bunched: {cycle:?}"
        );
        assert_eq!(
            "list".parse::<Mix>().unwrap(),
            Mix {
                call: 0,
                list: 1,
                read: 0
            }
        );
        assert_eq!(mix.to_string(), "call=8,list=1,read=1");
        for bad in [
            "",
            "call=0",
            "call=x",
            "write=1",
            "call=1,call=2",
            "call=5000",
        ] {
            assert!(bad.parse::<Mix>().is_err(), "{bad:?} accepted");
        }
    }
}
