//! The JSON of a schema as Jackson (Java Avro's JSON library) reads and writes
//! it: objects keep their keys in the order written (a repeated key keeps its
//! first place and its last value, as Jackson's tree does), numbers keep their
//! literal until printed, and printing is compact, with Jackson's escapes and
//! Java's number forms. The text has already parsed as JSON (apache-avro read it
//! first), so errors here are only a backstop.

use std::fmt::Write as _;

/// A JSON value with its object keys in written order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The literal as written, e.g. `1.50`, `-3`, `1e2`.
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
    /// A double that came from a text (an Avro float or double default written
    /// as a string, which Java Avro turns into a number).
    Double(f64),
}

impl Json {
    /// The value of `key` in an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of a string value (Jackson's `textValue`: `None` for anything else).
    pub fn text(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
}

/// Most nesting a schema's JSON may have (far beyond real schemas; it bounds the
/// parser's and printer's stacks).
const DEPTH_MAX: usize = 512;

/// Parses `text` into a tree.
pub fn parse(text: &str) -> Result<Json, String> {
    let mut reader = Reader { bytes: text.as_bytes(), text, at: 0 };
    let value = reader.value(0)?;
    reader.blank();
    if reader.at != reader.bytes.len() {
        return Err(format!("unexpected text after the JSON value at byte {}", reader.at));
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn blank(&mut self) {
        while self.bytes.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.at))
    }

    fn eat(&mut self, b: u8) -> bool {
        self.blank();
        let found = self.bytes.get(self.at) == Some(&b);
        if found {
            self.at += 1;
        }
        found
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > DEPTH_MAX {
            return self.fail("JSON nested too deeply");
        }
        self.blank();
        match self.bytes.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let mut entries: Vec<(String, Json)> = Vec::new();
                if self.eat(b'}') {
                    return Ok(Json::Object(entries));
                }
                loop {
                    self.blank();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return self.fail("expected a key");
                    }
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return self.fail("expected `:`");
                    }
                    let value = self.value(depth + 1)?;
                    match entries.iter_mut().find(|(k, _)| *k == key) {
                        Some(entry) => entry.1 = value,
                        None => entries.push((key, value)),
                    }
                    if self.eat(b',') {
                        continue;
                    }
                    if self.eat(b'}') {
                        return Ok(Json::Object(entries));
                    }
                    return self.fail("expected `,` or `}`");
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    if self.eat(b',') {
                        continue;
                    }
                    if self.eat(b']') {
                        return Ok(Json::Array(items));
                    }
                    return self.fail("expected `,` or `]`");
                }
            }
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                {
                    self.at += 1;
                }
                Ok(Json::Number(self.text[start..self.at].to_owned()))
            }
            _ => {
                for (word, value) in
                    [("true", Json::Bool(true)), ("false", Json::Bool(false)), ("null", Json::Null)]
                {
                    if self.text[self.at..].starts_with(word) {
                        self.at += word.len();
                        return Ok(value);
                    }
                }
                self.fail("expected a JSON value")
            }
        }
    }

    /// A string literal; `self.at` is on its opening quote.
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut value = String::new();
        loop {
            let rest = &self.text[self.at..];
            let Some(c) = rest.chars().next() else { return self.fail("unterminated string") };
            self.at += c.len_utf8();
            match c {
                '"' => return Ok(value),
                '\\' => {
                    let Some(&e) = self.bytes.get(self.at) else { return self.fail("unterminated string") };
                    self.at += 1;
                    match e {
                        b'b' => value.push('\u{8}'),
                        b'f' => value.push('\u{c}'),
                        b'n' => value.push('\n'),
                        b'r' => value.push('\r'),
                        b't' => value.push('\t'),
                        b'u' => {
                            let first = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&first)
                                && self.text[self.at..].starts_with("\\u")
                            {
                                self.at += 2;
                                let second = self.hex4()?;
                                0x10000 + ((first - 0xD800) << 10) + second.saturating_sub(0xDC00)
                            } else {
                                first
                            };
                            value.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        }
                        other => value.push(char::from(other)),
                    }
                }
                c => value.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .ok_or_else(|| format!("short \\u escape at byte {}", self.at))?;
        self.at += 4;
        u32::from_str_radix(digits, 16).map_err(|_| format!("bad \\u escape at byte {}", self.at))
    }
}

/// `value` printed as Jackson's compact writer prints a tree.
pub fn write(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(literal) => out.push_str(&number(literal)),
        Json::Double(d) => out.push_str(&double(*d)),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, item);
            }
            out.push(']');
        }
        Json::Object(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write(out, item);
            }
            out.push('}');
        }
    }
}

/// A string as Jackson writes it: `"` and `\` escaped, control characters as
/// `\b \t \n \f \r` or `\u00XX` (upper-case hex), everything else as it is.
pub fn write_string(out: &mut String, value: &str) {
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
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A number as Jackson's default tree holds and prints it: an integer as its
/// value (`-0` is `0`), anything with a fraction or exponent as a Java `double`.
fn number(literal: &str) -> String {
    if !literal.contains(['.', 'e', 'E']) {
        let (negative, digits) = literal.strip_prefix('-').map_or((false, literal), |d| (true, d));
        let digits = digits.trim_start_matches('0');
        return match (negative, digits.is_empty()) {
            (_, true) => "0".to_owned(),
            (true, false) => format!("-{digits}"),
            (false, false) => digits.to_owned(),
        };
    }
    literal.parse::<f64>().map_or_else(|_| literal.to_owned(), double)
}

/// Java's `Double.toString` (shortest digits that read back): plain decimals
/// from 10^-3 up to 10^7, `d.dddE±n` outside, always with a fraction digit;
/// NaN and the infinities as Jackson quotes them.
pub fn double(d: f64) -> String {
    if d.is_nan() {
        return "\"NaN\"".to_owned();
    }
    if d.is_infinite() {
        return if d > 0.0 { "\"Infinity\"".to_owned() } else { "\"-Infinity\"".to_owned() };
    }
    let magnitude = d.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{d}");
        return if plain.contains('.') { plain } else { format!("{plain}.0") };
    }
    let scientific = format!("{d:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exponent}")
}
