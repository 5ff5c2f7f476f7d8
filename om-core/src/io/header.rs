//! The safetensors header: a JSON object naming each tensor's dtype, shape and byte range
//! (plus an optional `__metadata__` map of strings), parsed and validated here without a
//! JSON library, and written in the byte layout of the reference `safetensors` crate.
//!
//! The format (<https://github.com/huggingface/safetensors>): 8 bytes little-endian header
//! length `n`, `n` bytes of UTF-8 JSON starting with `{` (space padded), then the tensors'
//! bytes, which the byte ranges must tile exactly in order.

use std::collections::BTreeMap;

/// The largest header the reference implementation accepts (100 MB).
pub(crate) const MAX_HEADER_BYTES: usize = 100_000_000;

/// One tensor's entry in the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The dtype's name as written (`F32`, `I64`, ...).
    pub dtype: String,
    pub shape: Vec<usize>,
    /// Byte range within the data section.
    pub begin: usize,
    pub end: usize,
}

/// Bytes per element of a dtype name, `None` for a name the format does not define.
pub(crate) fn dtype_size(name: &str) -> Option<usize> {
    Some(match name {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
        "I16" | "U16" | "F16" | "BF16" => 2,
        "I32" | "U32" | "F32" => 4,
        "I64" | "U64" | "F64" => 8,
        _ => return None,
    })
}

/// Splits `bytes` into the named entries (sorted by name) and the data section, checking
/// everything the format requires; the error says what is wrong.
pub(crate) fn parse(bytes: &[u8]) -> Result<(BTreeMap<String, Entry>, &[u8]), String> {
    let len = bytes.len();
    let prefix: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("the file is {len} bytes, too short for the 8-byte header length"))?;
    let n = u64::from_le_bytes(prefix);
    if n > MAX_HEADER_BYTES as u64 {
        return Err("the header length is above the 100 MB limit".into());
    }
    let header = bytes.get(8..8 + n as usize).ok_or_else(|| format!("the header length runs past the end of the file ({len} bytes)"))?;
    let text = std::str::from_utf8(header).map_err(|_| "the header is not UTF-8".to_string())?;
    if !text.starts_with('{') {
        return Err("the header does not start with `{`".into());
    }
    let entries = Parser { s: text.as_bytes(), i: 0 }.header()?;
    let data = &bytes[8 + n as usize..];
    validate(&entries, data.len())?;
    Ok((entries, data))
}

/// Checks that the byte ranges, in offset order, tile `data_len` bytes exactly and that
/// each range holds its shape's elements.
fn validate(entries: &BTreeMap<String, Entry>, data_len: usize) -> Result<(), String> {
    let mut order: Vec<(&String, &Entry)> = entries.iter().collect();
    order.sort_by_key(|(_, e)| (e.begin, e.end));
    let mut at = 0usize;
    for (name, e) in order {
        if e.begin != at || e.end < e.begin {
            return Err(format!("the byte range of `{name}` does not follow the previous tensor's"));
        }
        let size = dtype_size(&e.dtype).ok_or_else(|| format!("`{name}` has the unknown dtype \"{}\"", e.dtype))?;
        let bytes = e
            .shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|n| n.checked_mul(size))
            .ok_or_else(|| "a tensor's shape or byte size overflows".to_string())?;
        if e.end - e.begin != bytes {
            return Err("a tensor's byte range does not match its shape and dtype".into());
        }
        at = e.end;
    }
    if at != data_len {
        return Err("the tensors' byte ranges do not cover the data exactly (truncated or padded file)".into());
    }
    Ok(())
}

/// The header for tensors given in file order as `(name, dtype, shape, byte length)`, with
/// consecutive byte ranges, padded with spaces to a multiple of 8 bytes, as the reference
/// implementation writes it (no metadata).
pub(crate) fn write(tensors: &[(&str, &str, &[usize], usize)]) -> String {
    let mut s = String::from("{");
    let mut at = 0usize;
    for (k, (name, dtype, shape, len)) in tensors.iter().enumerate() {
        if k > 0 {
            s.push(',');
        }
        string(&mut s, name);
        s.push_str(":{\"dtype\":");
        string(&mut s, dtype);
        s.push_str(",\"shape\":[");
        for (j, d) in shape.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            s.push_str(&d.to_string());
        }
        s.push_str(&format!("],\"data_offsets\":[{at},{}]}}", at + len));
        at += len;
    }
    s.push('}');
    while s.len() % 8 != 0 {
        s.push(' ');
    }
    s
}

/// Appends `v` as a JSON string literal (escaping as serde_json does).
fn string(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON reader over the header text, for exactly the shapes a header may take.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

const BAD: &str = "the header is not valid safetensors JSON";

impl Parser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, b: u8) -> Result<(), String> {
        if self.peek() == Some(b) {
            self.i += 1;
            Ok(())
        } else {
            Err(BAD.into())
        }
    }

    /// The whole header: `{ name: entry | "__metadata__": {str: str} | null, ... }`, then
    /// only whitespace.
    fn header(mut self) -> Result<BTreeMap<String, Entry>, String> {
        let mut entries = BTreeMap::new();
        let mut metadata_seen = false;
        self.members(|p, key| {
            if key == "__metadata__" {
                if std::mem::replace(&mut metadata_seen, true) {
                    return Err("the header has `__metadata__` twice".into());
                }
                return p.metadata();
            }
            let entry = p.entry()?;
            if entries.insert(key.clone(), entry).is_some() {
                return Err(format!("the header names the tensor \"{key}\" twice"));
            }
            Ok(())
        })?;
        self.ws();
        if self.i != self.s.len() {
            return Err(BAD.into());
        }
        Ok(entries)
    }

    /// An object's members, each handed to `f` with its key (the value still unread).
    fn members(&mut self, mut f: impl FnMut(&mut Self, String) -> Result<(), String>) -> Result<(), String> {
        self.expect(b'{')?;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            f(self, key)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(BAD.into()),
            }
        }
    }

    /// `null` or an object of strings.
    fn metadata(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'n') {
            return self.literal("null");
        }
        self.members(|p, _| p.string().map(drop))
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(())
        } else {
            Err(BAD.into())
        }
    }

    /// `{"dtype": str, "shape": [uint...], "data_offsets": [uint, uint]}` in any order;
    /// other members are skipped, as the reference implementation does.
    fn entry(&mut self) -> Result<Entry, String> {
        let (mut dtype, mut shape, mut offsets) = (None, None, None);
        self.members(|p, key| {
            match key.as_str() {
                "dtype" if dtype.is_none() => dtype = Some(p.string()?),
                "shape" if shape.is_none() => shape = Some(p.uints()?),
                "data_offsets" if offsets.is_none() => offsets = Some(p.uints()?),
                "dtype" | "shape" | "data_offsets" => return Err(BAD.into()),
                _ => p.skip()?,
            }
            Ok(())
        })?;
        let (Some(dtype), Some(shape), Some(offsets)) = (dtype, shape, offsets) else {
            return Err(BAD.into());
        };
        let [begin, end] = offsets[..] else { return Err(BAD.into()) };
        if dtype_size(&dtype).is_none() {
            return Err(BAD.into());
        }
        Ok(Entry { dtype, shape, begin, end })
    }

    /// `[uint, ...]`.
    fn uints(&mut self) -> Result<Vec<usize>, String> {
        self.expect(b'[')?;
        let mut out = Vec::new();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(out);
        }
        loop {
            out.push(self.uint()?);
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(out);
                }
                _ => return Err(BAD.into()),
            }
        }
    }

    /// A non-negative integer without sign, fraction, exponent or leading zeros.
    fn uint(&mut self) -> Result<usize, String> {
        self.ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let digits = &self.s[start..self.i];
        let number_continues = self.s.get(self.i).is_some_and(|b| matches!(b, b'.' | b'e' | b'E'));
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') || number_continues {
            return Err(BAD.into());
        }
        digits.iter().try_fold(0usize, |acc, &d| acc.checked_mul(10)?.checked_add(usize::from(d - b'0'))).ok_or_else(|| BAD.to_string())
    }

    /// A string literal, escapes decoded.
    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.s.get(self.i).is_some_and(|&b| b != b'"' && b != b'\\' && b >= 0x20) {
                self.i += 1;
            }
            // The header was checked to be UTF-8 and the run stops only at ASCII bytes.
            out.push_str(std::str::from_utf8(&self.s[start..self.i]).map_err(|_| BAD.to_string())?);
            match self.s.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.s.get(self.i) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.i += 1;
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                self.literal("\\u")?;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(BAD.into());
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(char::from_u32(code).ok_or_else(|| BAD.to_string())?);
                            continue;
                        }
                        _ => return Err(BAD.into()),
                    };
                    self.i += 1;
                    out.push(c);
                }
                _ => return Err(BAD.into()),
            }
        }
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.s.get(self.i..self.i + 4).ok_or_else(|| BAD.to_string())?;
        let text = std::str::from_utf8(digits).map_err(|_| BAD.to_string())?;
        let v = u32::from_str_radix(text, 16).map_err(|_| BAD.to_string())?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(BAD.into());
        }
        self.i += 4;
        Ok(v)
    }

    /// Any JSON value (an unknown member of an entry), checked and skipped.
    fn skip(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(b'{') => self.members(|p, _| p.skip()),
            Some(b'[') => {
                self.i += 1;
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.skip()?;
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(BAD.into()),
                    }
                }
            }
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| BAD.to_string())?;
                text.parse::<f64>().map(drop).map_err(|_| BAD.to_string())
            }
            _ => Err(BAD.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn metadata_escapes_and_unknown_members_are_read() {
        let h = r#"{"__metadata__":{"format":"pt","k":"\u00e9\"\\"},"w\u00e9\ud83d\ude00":{"shape":[2],"dtype":"F32","extra":[1,{"a":null}],"data_offsets":[0,8]}}  "#;
        let bytes = file(h, &[0; 8]);
        let (entries, data) = parse(&bytes).unwrap();
        assert_eq!(data.len(), 8);
        let e = &entries["wé😀"];
        assert_eq!((e.dtype.as_str(), &e.shape[..], e.begin, e.end), ("F32", &[2][..], 0, 8));
    }

    #[test]
    fn malformed_headers_are_refused_with_a_reason() {
        let entry = r#""a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}"#;
        let cases: &[(&str, &str)] = &[
            (&format!("{{{entry}}} x"), "not valid safetensors JSON"),
            (&format!("{{{entry},{entry}}}"), "\"a\" twice"),
            (r#"{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}"#, "JSON"),
            (r#"{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}"#, "JSON"),
            (r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#, "JSON"),
            (r#"{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}"#, "JSON"),
            (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}"#, "JSON"),
            (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#, "does not match its shape"),
            (r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#, "does not follow"),
            (r#"{"a":{"dtype":"F32","shape":[99999999999,99999999999],"data_offsets":[0,4]}}"#, "overflows"),
            (" {}", "does not start with `{`"),
        ];
        for (header, reason) in cases {
            let e = parse(&file(header, &[0; 4])).unwrap_err();
            assert!(e.contains(reason), "{header}: `{e}` should say {reason}");
        }
        assert!(parse(&file("{}", &[0; 4])).unwrap_err().contains("do not cover the data"));
        assert!(parse(&[1, 0, 0]).unwrap_err().contains("too short"));
        assert!(parse(&u64::MAX.to_le_bytes()).unwrap_err().contains("100 MB"));
        assert!(parse(&file("{\"\u{1}\":1}", &[])).is_err());
    }

    #[test]
    fn written_headers_parse_back_and_are_padded() {
        let h = write(&[("x\"\n", "F32", &[2, 3], 24), ("y", "I32", &[], 4)]);
        assert_eq!(h.len() % 8, 0);
        let (entries, _) = parse(&file(&h, &[0; 28])).unwrap();
        assert_eq!(entries["x\"\n"].shape, vec![2, 3]);
        assert_eq!((entries["y"].begin, entries["y"].end), (24, 28));
    }
}
