//! Value parsers shared by the benchmark binaries' command lines (clap `value_parser`s), so
//! a bad number is refused when it is parsed, with a message naming the option.

use std::time::Duration;

/// A whole number of type `T` of at least 1.
pub fn positive<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
{
    let n: T = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number in range"))?;
    if n < T::from(1) {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

/// A size in bytes (K/M/G/T suffixes) of more than zero.
pub fn positive_size(text: &str) -> Result<u64, String> {
    match ziob::backends::parse_size_bytes(text)? {
        0 => Err("must be more than 0 bytes".into()),
        n => Ok(n),
    }
}

/// A duration in seconds (fractions allowed): more than zero, and short enough for a
/// [`Duration`].
pub fn positive_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err("must be more than 0 seconds".into());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{text} seconds is too long"))
}

/// [`positive_seconds`] as `f64` seconds, for code that computes in seconds.
pub fn positive_seconds_f64(text: &str) -> Result<f64, String> {
    positive_seconds(text).map(|d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_accept_what_they_promise_and_refuse_the_rest() {
        assert_eq!(positive::<u32>("7"), Ok(7));
        assert!(positive::<u32>("0").is_err());
        assert!(positive::<u32>("-1").is_err());
        assert!(positive::<u32>("4294967296").is_err());
        assert_eq!(positive_size("4K"), Ok(4096));
        assert!(positive_size("0").is_err());
        assert!(positive_size("18014398509481984K").is_err());
        assert_eq!(positive_seconds("0.5"), Ok(Duration::from_millis(500)));
        for bad in ["0", "-1", "nan", "NaN", "inf", "1e30", "", "x"] {
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
    }
}
