//! UTC time stamps for manifests (RFC 3339) and for the names of kept directories,
//! without a date-time dependency: only the civil date of a Unix time is needed.

use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time as seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub unix_secs: u64,
}

impl Stamp {
    pub fn now() -> Stamp {
        let unix_secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Stamp { unix_secs }
    }

    /// `2026-12-01T13:11:23Z`.
    pub fn rfc3339(self) -> String {
        let (y, mo, d, h, mi, s) = self.fields();
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }

    /// `20261201T131123Z`: sorts by time and is safe in a file name.
    pub fn compact(self) -> String {
        let (y, mo, d, h, mi, s) = self.fields();
        format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
    }

    fn fields(self) -> (u64, u64, u64, u64, u64, u64) {
        let days = self.unix_secs / 86_400;
        let secs = self.unix_secs % 86_400;
        let (y, m, d) = civil_date(days);
        (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
    }
}

/// The proleptic Gregorian date of `days` after 1970-01-01. The calendar repeats
/// every 400 years (146,097 days); counting from 0000-03-01 puts the leap day at the
/// end of each year, so a year's days split evenly into months of 153 days per five.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // 719,468 days separate 0000-03-01 from 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_format() {
        assert_eq!(Stamp { unix_secs: 0 }.rfc3339(), "1970-01-01T00:00:00Z");
        // `date -u -d @951782400`: the leap day of a year divisible by 400.
        assert_eq!(Stamp { unix_secs: 951_782_400 }.rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(Stamp { unix_secs: 1_796_130_683 }.rfc3339(), "2026-12-01T13:11:23Z");
        assert_eq!(Stamp { unix_secs: 1_796_130_683 }.compact(), "20261201T131123Z");
        assert_eq!(Stamp { unix_secs: 4_107_542_399 }.rfc3339(), "2100-02-28T23:59:59Z");
    }
}
