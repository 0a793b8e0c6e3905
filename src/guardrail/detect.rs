//! The detectors of guardrails: common secrets (cloud and Git host keys, private keys, JWTs,
//! key-like names given high-entropy values) and personal data (e-mail addresses, card numbers
//! that pass the Luhn check, IBANs that pass their check digits, international phone numbers).
//! Each is a regular expression, and, where a pattern alone would find too much, a check of
//! what it found. What is found is a range of the text, never kept beyond the scan.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// One kind of thing a guardrail looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Detector {
    AwsAccessKey,
    GithubToken,
    GoogleApiKey,
    SlackToken,
    StripeKey,
    PrivateKey,
    Jwt,
    GenericSecret,
    Email,
    CardNumber,
    Iban,
    Phone,
}

/// Every detector, secrets first.
pub const ALL: [Detector; 12] = [
    Detector::AwsAccessKey,
    Detector::GithubToken,
    Detector::GoogleApiKey,
    Detector::SlackToken,
    Detector::StripeKey,
    Detector::PrivateKey,
    Detector::Jwt,
    Detector::GenericSecret,
    Detector::Email,
    Detector::CardNumber,
    Detector::Iban,
    Detector::Phone,
];

impl Detector {
    pub fn name(self) -> &'static str {
        match self {
            Detector::AwsAccessKey => "aws_access_key",
            Detector::GithubToken => "github_token",
            Detector::GoogleApiKey => "google_api_key",
            Detector::SlackToken => "slack_token",
            Detector::StripeKey => "stripe_key",
            Detector::PrivateKey => "private_key",
            Detector::Jwt => "jwt",
            Detector::GenericSecret => "generic_secret",
            Detector::Email => "email",
            Detector::CardNumber => "card_number",
            Detector::Iban => "iban",
            Detector::Phone => "phone",
        }
    }

    /// Whether it finds secrets (else personal data).
    pub fn is_secret(self) -> bool {
        !matches!(
            self,
            Detector::Email | Detector::CardNumber | Detector::Iban | Detector::Phone
        )
    }

    /// The detectors a name in `detect` stands for: one by its name, or the groups `secrets`
    /// and `personal`.
    pub fn named(name: &str) -> Option<Vec<Detector>> {
        match name {
            "secrets" => Some(ALL.into_iter().filter(|d| d.is_secret()).collect()),
            "personal" => Some(ALL.into_iter().filter(|d| !d.is_secret()).collect()),
            _ => ALL.into_iter().find(|d| d.name() == name).map(|d| vec![d]),
        }
    }

    /// The ranges of `text` this detector finds.
    pub fn find(self, text: &str) -> Vec<std::ops::Range<usize>> {
        let pattern = &PATTERNS[self as usize];
        match self {
            // The value alone, where it looks random enough to be a secret.
            Detector::GenericSecret => pattern
                .captures_iter(text)
                .filter_map(|found| found.get(1))
                .filter(|value| entropy(value.as_str()) >= 3.5)
                .map(|value| value.range())
                .collect(),
            Detector::CardNumber => checked(pattern, text, luhn),
            Detector::Iban => checked(pattern, text, iban),
            Detector::Phone => checked(pattern, text, |found| {
                (8..=15).contains(&found.bytes().filter(u8::is_ascii_digit).count())
            }),
            _ => pattern.find_iter(text).map(|found| found.range()).collect(),
        }
    }
}

/// The patterns, in the order of `ALL`.
static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    SOURCES
        .into_iter()
        .map(|pattern| Regex::new(pattern).expect("a valid detector pattern"))
        .collect()
});

/// All the patterns at once: one pass over a text says which detectors have anything to find
/// in it (most texts: none), and only those look further.
static ANY: LazyLock<RegexSet> =
    LazyLock::new(|| RegexSet::new(SOURCES).expect("valid detector patterns"));

/// The detectors of `detectors` whose pattern matches somewhere in `text`.
pub fn candidates(text: &str, detectors: &[Detector]) -> Vec<Detector> {
    let matched = ANY.matches(text);
    if !matched.matched_any() {
        return Vec::new();
    }
    (detectors.iter())
        .filter(|detector| matched.matched(**detector as usize))
        .copied()
        .collect()
}

/// The patterns' sources, in the order of `ALL`.
const SOURCES: [&str; 12] = [
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
    r"\bAIza[0-9A-Za-z_\-]{35}\b",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}\b",
    r"\b[sr]k_live_[0-9A-Za-z]{20,}\b",
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}",
    r#"(?i)(?:api[_\-]?key|secret|token|password|passwd|pwd|access[_\-]?key|client[_\-]?secret)["']?\s*[:=]\s*["']?([A-Za-z0-9/+_\-.=~]{16,})"#,
    r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b",
    r"\b\d(?:[ \-]?\d){12,18}\b",
    r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b",
    r"\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}",
];

/// What `pattern` finds in `text` that also passes `check`.
fn checked(
    pattern: &Regex,
    text: &str,
    check: impl Fn(&str) -> bool,
) -> Vec<std::ops::Range<usize>> {
    pattern
        .find_iter(text)
        .filter(|found| check(found.as_str()))
        .map(|found| found.range())
        .collect()
}

/// Shannon entropy of `text`, in bits per character.
fn entropy(text: &str) -> f64 {
    let mut counts = [0u32; 256];
    for byte in text.bytes() {
        counts[usize::from(byte)] += 1;
    }
    let length = text.len() as f64;
    counts
        .iter()
        .filter(|count| **count > 0)
        .map(|count| {
            let p = f64::from(*count) / length;
            -p * p.log2()
        })
        .sum()
}

/// The Luhn check of a card number's digits (13 to 19 of them).
fn luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = (digits.iter().rev().enumerate())
        .map(|(i, digit)| match i % 2 {
            0 => *digit,
            _ if *digit * 2 > 9 => *digit * 2 - 9,
            _ => *digit * 2,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The check digits of an IBAN (ISO 13616: mod 97 of the rearranged number is 1).
fn iban(text: &str) -> bool {
    let compact: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let rearranged = compact[4..].iter().chain(&compact[..4]);
    let mut remainder = 0u32;
    for c in rearranged {
        let value = match c.to_digit(36) {
            Some(value) => value,
            None => return false,
        };
        let width = if value >= 10 { 100 } else { 10 };
        remainder = (remainder * width + value) % 97;
    }
    remainder == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(detector: Detector, text: &str) -> Vec<&str> {
        detector.find(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn secrets_are_found_and_look_alikes_are_not() {
        let aws = "key AKIAIOSFODNN7EXAMPLE here";
        assert_eq!(found(Detector::AwsAccessKey, aws), ["AKIAIOSFODNN7EXAMPLE"]);
        let gh = format!("token ghp_{}", "a1B2".repeat(9));
        assert_eq!(found(Detector::GithubToken, &gh).len(), 1);
        let pem = "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\ny";
        assert!(found(Detector::PrivateKey, pem)[0].ends_with("PRIVATE KEY-----"));
        let jwt = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(found(Detector::Jwt, jwt).len(), 1);
        let config = r#"{"api_key": "q8Zr2LmX0pT7vK3wN9sB4yH6"}"#;
        assert_eq!(
            found(Detector::GenericSecret, config),
            ["q8Zr2LmX0pT7vK3wN9sB4yH6"]
        );
        assert!(
            found(Detector::GenericSecret, "password = aaaaaaaaaaaaaaaaaaaa").is_empty(),
            "no entropy"
        );
        assert!(found(Detector::AwsAccessKey, "AKIA is a prefix").is_empty());
    }

    #[test]
    fn personal_data_is_found_with_its_checks() {
        assert_eq!(
            found(Detector::Email, "write to ada@example.org."),
            ["ada@example.org"]
        );
        assert_eq!(
            found(Detector::CardNumber, "card 4111 1111 1111 1111 ok"),
            ["4111 1111 1111 1111"]
        );
        assert!(
            found(Detector::CardNumber, "order 4111 1111 1111 1112").is_empty(),
            "Luhn"
        );
        assert!(
            found(Detector::CardNumber, "id 20261128093500").is_empty(),
            "Luhn"
        );
        assert_eq!(
            found(Detector::Iban, "IBAN GB82 WEST 1234 5698 7654 32"),
            ["GB82 WEST 1234 5698 7654 32"]
        );
        assert!(
            found(Detector::Iban, "GB83 WEST 1234 5698 7654 32").is_empty(),
            "check digits"
        );
        assert_eq!(
            found(Detector::Phone, "call +44 20 7946 0958 now"),
            ["+44 20 7946 0958"]
        );
        assert!(found(Detector::Phone, "version +1.2").is_empty());
    }

    #[test]
    fn names_and_groups() {
        assert_eq!(Detector::named("email"), Some(vec![Detector::Email]));
        assert_eq!(Detector::named("personal").unwrap().len(), 4);
        assert_eq!(Detector::named("secrets").unwrap().len(), 8);
        assert_eq!(Detector::named("ssn"), None);
        for (i, detector) in ALL.into_iter().enumerate() {
            assert_eq!(detector as usize, i, "PATTERNS follows ALL");
        }
    }
}
