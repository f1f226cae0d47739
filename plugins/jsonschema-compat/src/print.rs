//! A JSON Schema printed as written, as Confluent's registry stores it (its
//! `JsonSchema.canonicalString`, Jackson's compact print of the parsed tree):
//! no whitespace, keys in the order written, strings re-escaped as Jackson
//! escapes them, integers as integers and decimals as Java's `BigDecimal`
//! prints them (Confluent reads floats as exact decimals), so `1.50` stays
//! `1.50` and `1e2` becomes `1E+2`. Two texts that differ only in layout print
//! the same; a reordered schema prints differently, so Confluent (and es) make it
//! a new version.

/// The compact print of `text`, which must already have parsed as JSON.
pub fn as_written(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {}
            '"' => {
                let value =
                    read_string(&mut chars).ok_or_else(|| format!("unterminated string at byte {at}"))?;
                write_string(&mut out, &value);
            }
            '-' | '0'..='9' => {
                let mut number = String::from(c);
                while let Some((_, d)) =
                    chars.next_if(|(_, d)| matches!(d, '0'..='9' | '.' | 'e' | 'E' | '+' | '-'))
                {
                    number.push(d);
                }
                out.push_str(&number_text(&number));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The value of a string literal whose opening quote was read.
fn read_string(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> Option<String> {
    let mut value = String::new();
    loop {
        let (_, c) = chars.next()?;
        match c {
            '"' => return Some(value),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'b' => value.push('\u{8}'),
                    'f' => value.push('\u{c}'),
                    'n' => value.push('\n'),
                    'r' => value.push('\r'),
                    't' => value.push('\t'),
                    'u' => value.push_str(&read_unicode(chars)?),
                    other => value.push(other),
                }
            }
            c => value.push(c),
        }
    }
}

/// The character of a `\uXXXX` escape (a surrogate pair takes two).
fn read_unicode(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> Option<String> {
    let hex = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| -> Option<u32> {
        let digits: String = (0..4).map(|_| chars.next().map(|(_, c)| c)).collect::<Option<String>>()?;
        u32::from_str_radix(&digits, 16).ok()
    };
    let first = hex(chars)?;
    if (0xD800..0xDC00).contains(&first) {
        // The low half follows as its own escape.
        chars.next()?;
        chars.next()?;
        let second = hex(chars)?;
        let code = 0x10000 + ((first - 0xD800) << 10) + (second.checked_sub(0xDC00)?);
        return char::from_u32(code).map(String::from);
    }
    Some(char::from_u32(first).unwrap_or('\u{FFFD}').to_string())
}

/// A string as Jackson writes it: `"` and `\` escaped, control characters as
/// `\b \t \n \f \r` or `\u00XX`, everything else as it is.
fn write_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON number as Jackson prints it with exact decimals: an integer as its
/// value, a decimal as `BigDecimal.toString` does.
fn number_text(literal: &str) -> String {
    let (negative, body) = literal.strip_prefix('-').map_or((false, literal), |rest| (true, rest));
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (body, 0),
    };
    let exponent_written = body.contains(['e', 'E']);
    let (int_part, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int_part}{fraction}");
    let digits = digits.trim_start_matches('0');
    let unscaled = if digits.is_empty() { "0" } else { digits };
    let is_zero = unscaled == "0";
    let sign = if negative && !is_zero { "-" } else { "" };
    if fraction.is_empty() && !exponent_written {
        return format!("{sign}{unscaled}");
    }
    let scale = i64::try_from(fraction.len()).unwrap_or(i64::MAX) - exponent;
    format!("{sign}{}", big_decimal(unscaled, scale))
}

/// `BigDecimal.toString` of `unscaled * 10^-scale`.
fn big_decimal(unscaled: &str, scale: i64) -> String {
    let length = i64::try_from(unscaled.len()).unwrap_or(i64::MAX);
    let adjusted = -scale + (length - 1);
    if scale == 0 {
        return unscaled.to_owned();
    }
    if scale > 0 && adjusted >= -6 {
        let point = length - scale;
        return if point > 0 {
            let point = usize::try_from(point).unwrap_or(0);
            format!("{}.{}", &unscaled[..point], &unscaled[point..])
        } else {
            let zeros = usize::try_from(-point).unwrap_or(0);
            format!("0.{}{unscaled}", "0".repeat(zeros))
        };
    }
    let (first, rest) = unscaled.split_at(1);
    let mantissa = if rest.is_empty() { first.to_owned() } else { format!("{first}.{rest}") };
    let sign = if adjusted >= 0 { "+" } else { "-" };
    format!("{mantissa}E{sign}{}", adjusted.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_goes_and_key_order_stays() {
        let text =
            "{\n  \"type\": \"object\",\n  \"properties\": { \"b\": {\"type\": \"string\"}, \"a\": {} }\n}";
        assert_eq!(
            as_written(text).unwrap(),
            r#"{"type":"object","properties":{"b":{"type":"string"},"a":{}}}"#
        );
        let reordered = r#"{"properties":{"a":{},"b":{"type":"string"}},"type":"object"}"#;
        assert_ne!(as_written(reordered).unwrap(), as_written(text).unwrap());
    }

    #[test]
    fn strings_are_escaped_as_jackson_escapes_them() {
        assert_eq!(
            as_written(r#"["a b", "\u0041\/", "tab\there", "\u0001", "é"]"#).unwrap(),
            "[\"a b\",\"A/\",\"tab\\there\",\"\\u0001\",\"é\"]"
        );
        assert_eq!(as_written(r#""\ud83d\ude00""#).unwrap(), "\"😀\"");
    }

    #[test]
    fn numbers_are_printed_as_exact_decimals() {
        assert_eq!(
            as_written("[0, -0, 12, 1.50, 1e2, 1.5E3, 0.00001, 1e-7, -2.5e-1, 0.0]").unwrap(),
            "[0,0,12,1.50,1E+2,1.5E+3,0.00001,1E-7,-0.25,0.0]"
        );
    }
}
