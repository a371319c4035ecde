//! Whether Go's `regexp.Compile` accepts a pattern, and its error text when it does not
//! (`error parsing regexp: missing closing ]: `[a``). Go's syntax is RE2's, as the `regex`
//! crate's, with differences this module settles before handing the pattern to the crate:
//! Go's own checks and texts for the common errors (escapes, classes, named groups, repeat
//! counts up to 1000, nested repetitions), and rewrites of what Go accepts and the crate
//! does not (a `{` starting no repetition, a `-` after a class in a class, duplicate or
//! digit-led group names, surrogate code points, `\Q…\E`, octal escapes).

/// Go's error text for `pattern`, `None` when Go compiles it.
pub(crate) fn go_regexp_error(pattern: &str) -> Option<String> {
    let mut scan = Scan { c: pattern.chars().collect(), edits: Vec::new() };
    if let Err(e) = scan.run() {
        return Some(format!("error parsing regexp: {e}"));
    }
    let normalized = scan.normalized();
    // Go nests groups up to 1000 deep.
    match regex::RegexBuilder::new(&normalized).nest_limit(1000).build() {
        Ok(_) => None,
        Err(e) => {
            let text = e.to_string();
            let last =
                text.lines().rev().find(|l| l.starts_with("error:")).unwrap_or("error: invalid regexp");
            Some(format!("error parsing regexp: {}: `{pattern}`", last.trim_start_matches("error: ")))
        }
    }
}

/// The Unicode general categories Go knows (`unicode.Categories`).
const CATEGORIES: [&str; 38] = [
    "C", "Cc", "Cf", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn", "N", "Nd", "Nl",
    "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm", "So", "Z", "Zl", "Zp", "Zs",
    "Any", "LC",
];

struct Scan {
    c: Vec<char>,
    /// Replacements of char ranges for the `regex` crate: (start, end, text).
    edits: Vec<(usize, usize, String)>,
}

/// What an escape is.
enum Esc {
    Char(u32),
    Class,
    Assertion,
    /// `\Q…\E`: whether it quotes anything.
    Quote(bool),
}

type R<T> = Result<T, String>;

impl Scan {
    fn text(&self, from: usize, to: usize) -> String {
        self.c[from..to.min(self.c.len())].iter().collect()
    }

    fn normalized(&self) -> String {
        let mut edits = self.edits.clone();
        edits.sort_by_key(|e| e.0);
        let mut out = String::new();
        let mut i = 0;
        for (start, end, text) in edits {
            if start < i {
                continue;
            }
            out.extend(&self.c[i..start]);
            out.push_str(&text);
            i = end;
        }
        out.extend(&self.c[i..]);
        out
    }

    /// The escape at `i` (a backslash): what it is and where it ends.
    fn escape(&mut self, i: usize, in_class: bool) -> R<(Esc, usize)> {
        let Some(&c) = self.c.get(i + 1) else {
            return Err("trailing backslash at end of expression: ``".into());
        };
        let invalid = |s: &Scan, end: usize| Err(format!("invalid escape sequence: `{}`", s.text(i, end)));
        match c {
            '1'..='7' if !self.c.get(i + 2).is_some_and(|d| ('0'..='7').contains(d)) => invalid(self, i + 2),
            '0'..='7' => {
                let mut j = i + 2;
                let mut v = c.to_digit(8).unwrap_or(0);
                while j < i + 4 && self.c.get(j).is_some_and(|d| ('0'..='7').contains(d)) {
                    v = v * 8 + self.c[j].to_digit(8).unwrap_or(0);
                    j += 1;
                }
                self.edits.push((i, j, format!("\\x{{{v:x}}}")));
                Ok((Esc::Char(v), j))
            }
            'x' => {
                if self.c.get(i + 2) == Some(&'{') {
                    let mut j = i + 3;
                    let mut v: u32 = 0;
                    let mut digits = 0;
                    while let Some(d) = self.c.get(j).and_then(|c| c.to_digit(16)) {
                        v = v.saturating_mul(16).saturating_add(d);
                        digits += 1;
                        j += 1;
                        if v > 0x10FFFF {
                            return invalid(self, j);
                        }
                    }
                    if digits == 0 || self.c.get(j) != Some(&'}') {
                        return invalid(self, j + 1);
                    }
                    if (0xD800..0xE000).contains(&v) {
                        // Go takes a surrogate as a code point; the crate does not.
                        self.edits.push((i, j + 1, "\\x{FFFD}".into()));
                    }
                    Ok((Esc::Char(v), j + 1))
                } else {
                    let x = self.c.get(i + 2).and_then(|c| c.to_digit(16));
                    let y = self.c.get(i + 3).and_then(|c| c.to_digit(16));
                    match (x, y) {
                        (Some(x), Some(y)) => Ok((Esc::Char(x * 16 + y), i + 4)),
                        _ => invalid(self, i + 4),
                    }
                }
            }
            'a' => Ok((Esc::Char(7), i + 2)),
            'f' => Ok((Esc::Char(12), i + 2)),
            'n' => Ok((Esc::Char(10), i + 2)),
            'r' => Ok((Esc::Char(13), i + 2)),
            't' => Ok((Esc::Char(9), i + 2)),
            'v' => Ok((Esc::Char(11), i + 2)),
            'd' | 'D' | 's' | 'S' | 'w' | 'W' => Ok((Esc::Class, i + 2)),
            'p' | 'P' => {
                let (name, end) = if self.c.get(i + 2) == Some(&'{') {
                    let Some(close) = (i + 3..self.c.len()).find(|&j| self.c[j] == '}') else {
                        return Err(format!(
                            "invalid character class range: `{}`",
                            self.text(i, self.c.len())
                        ));
                    };
                    (self.text(i + 3, close), close + 1)
                } else {
                    match self.c.get(i + 2) {
                        Some(n) => (n.to_string(), i + 3),
                        None => {
                            return Err(format!("invalid character class range: `{}`", self.text(i, i + 2)))
                        }
                    }
                };
                let bare = name.strip_prefix('^').unwrap_or(&name);
                // Go's categories and scripts (matched loosely, as Go 1.27 does); the crate
                // knows them under the same names.
                let loose = bare.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
                    && (regex::Regex::new(&format!("\\p{{Script={bare}}}")).is_ok()
                        || regex::Regex::new(&format!("\\p{{gc={bare}}}")).is_ok());
                if !(CATEGORIES.contains(&bare) || loose) {
                    return Err(format!("invalid character class range: `{}`", self.text(i, end)));
                }
                // The crate reads neither `\p{^X}` nor every spelling: any class will do.
                self.edits.push((i, end, "\\pL".into()));
                Ok((Esc::Class, end))
            }
            'A' | 'z' | 'b' | 'B' if !in_class => Ok((Esc::Assertion, i + 2)),
            'Q' if !in_class => {
                // Literal text up to `\E` (or the end).
                let end = (i + 2..self.c.len().saturating_sub(1))
                    .find(|&j| self.c[j] == '\\' && self.c[j + 1] == 'E')
                    .map_or(self.c.len(), |j| j + 2);
                let body_end =
                    if end == self.c.len() && !self.text(i, end).ends_with("\\E") { end } else { end - 2 };
                let body = self.text(i + 2, body_end);
                self.edits.push((i, end, format!("(?:{})", regex::escape(&body))));
                Ok((Esc::Quote(!body.is_empty()), end))
            }
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((Esc::Char(c as u32), i + 2)),
            _ => invalid(self, i + 2),
        }
    }

    /// A bracketed class starting at `start` (`[`): where it ends.
    fn class(&mut self, start: usize) -> R<usize> {
        let mut i = start + 1;
        if self.c.get(i) == Some(&'^') {
            i += 1;
        }
        let mut first = true;
        loop {
            let Some(&c) = self.c.get(i) else {
                return Err(format!("missing closing ]: `{}`", self.text(start, self.c.len())));
            };
            if c == ']' && !first {
                return Ok(i + 1);
            }
            first = false;
            if c == '[' && self.c.get(i + 1) == Some(&':') {
                if let Some(end) = (i + 2..self.c.len().saturating_sub(1))
                    .find(|&j| self.c[j] == ':' && self.c[j + 1] == ']')
                {
                    let name = self.text(i + 2, end);
                    let known = [
                        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print",
                        "punct", "space", "upper", "word", "xdigit",
                    ];
                    if !known.contains(&name.strip_prefix('^').unwrap_or(&name)) {
                        return Err(format!("invalid character class range: `{}`", self.text(i, end + 2)));
                    }
                    i = end + 2;
                    self.dash_after_class(i);
                    continue;
                }
            }
            let lo_start = i;
            let (lo, next) = if c == '\\' {
                match self.escape(i, true)? {
                    (Esc::Char(v), next) => (v, next),
                    (_, next) => {
                        i = next;
                        self.dash_after_class(i);
                        continue;
                    }
                }
            } else {
                (c as u32, i + 1)
            };
            i = next;
            if self.c.get(i) == Some(&'-') && self.c.get(i + 1).is_some_and(|&n| n != ']') {
                let (hi, after) = if self.c[i + 1] == '\\' {
                    match self.escape(i + 1, true) {
                        Ok((Esc::Char(v), after)) => (v, after),
                        Ok(_) => {
                            return Err(format!("invalid escape sequence: `{}`", self.text(i + 1, i + 3)))
                        }
                        Err(e) => return Err(e),
                    }
                } else {
                    (self.c[i + 1] as u32, i + 2)
                };
                if hi < lo {
                    return Err(format!("invalid character class range: `{}`", self.text(lo_start, after)));
                }
                i = after;
            }
        }
    }

    /// After a class inside a class, Go reads a `-` as a character; the crate wants `\-`.
    fn dash_after_class(&mut self, i: usize) {
        if self.c.get(i) == Some(&'-') && self.c.get(i + 1).is_some_and(|&n| n != ']') {
            self.edits.push((i, i + 1, "\\-".into()));
        }
    }

    fn run(&mut self) -> R<()> {
        let p = self.text(0, self.c.len());
        let mut i = 0;
        let mut depth = 0usize;
        // Whether the previous item can take a repetition operator, and whether it is one.
        let mut operand = false;
        let mut repeated = false;
        let mut last_op = 0;
        while i < self.c.len() {
            let c = self.c[i];
            match c {
                '\\' => {
                    let (esc, next) = self.escape(i, false)?;
                    i = next;
                    if !matches!(esc, Esc::Quote(false)) {
                        operand = true;
                        repeated = false;
                    }
                    continue;
                }
                '[' => {
                    i = self.class(i)?;
                    operand = true;
                    repeated = false;
                    continue;
                }
                '(' => {
                    depth += 1;
                    operand = false;
                    repeated = false;
                    if self.c.get(i + 1) != Some(&'?') {
                        i += 1;
                        continue;
                    }
                    let n = self.c.get(i + 2).copied();
                    let named_at = match (n, self.c.get(i + 3)) {
                        (Some('P'), Some('<')) => Some(i + 4),
                        (Some('<'), _) => Some(i + 3),
                        _ => None,
                    };
                    if let Some(name_start) = named_at {
                        let Some(end) = (name_start..self.c.len()).find(|&j| self.c[j] == '>') else {
                            return Err(format!("invalid named capture: `{}`", self.text(i, self.c.len())));
                        };
                        let name = self.text(name_start, end);
                        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                            return Err(format!("invalid named capture: `{}`", self.text(i, end + 1)));
                        }
                        // Names do not matter for validity (Go allows duplicates, digits first).
                        self.edits.push((i, end + 1, "(".into()));
                        i = end + 1;
                        continue;
                    }
                    // Flags: `(?flags)` or `(?flags:`.
                    let mut j = i + 2;
                    let mut sign = false;
                    let mut any = false;
                    loop {
                        match self.c.get(j) {
                            Some('i' | 'm' | 's' | 'U') => any = true,
                            Some('-') if !sign => {
                                sign = true;
                                any = false;
                            }
                            Some(':' | ')') if any || !sign => break,
                            _ => {
                                return Err(format!(
                                    "invalid or unsupported Perl syntax: `{}`",
                                    self.text(i, j + 1)
                                ))
                            }
                        }
                        j += 1;
                    }
                    if self.c[j] == ')' {
                        // A flags group opens no group.
                        depth -= 1;
                    }
                    i = j + 1;
                    continue;
                }
                ')' => {
                    if depth == 0 {
                        return Err(format!("unexpected ): `{p}`"));
                    }
                    depth -= 1;
                    operand = true;
                    repeated = false;
                }
                '|' => {
                    operand = false;
                    repeated = false;
                }
                '*' | '+' | '?' | '{' => {
                    let mut end = i + 1;
                    if c == '{' {
                        let close = (i + 1..self.c.len()).find(|&j| self.c[j] == '}');
                        let counts = close.and_then(|j| {
                            let body = self.text(i + 1, j);
                            let (lo, hi) = match body.split_once(',') {
                                Some((lo, hi)) => (lo.to_owned(), Some(hi.to_owned())),
                                None => (body.clone(), None),
                            };
                            let num = |s: &str| {
                                (!s.is_empty() && s.bytes().all(|d| d.is_ascii_digit()))
                                    .then(|| s.parse::<u64>().unwrap_or(u64::MAX))
                            };
                            let lo = num(&lo)?;
                            let hi = match hi.as_deref() {
                                None => Some(lo),
                                Some("") => None,
                                Some(h) => Some(num(h)?),
                            };
                            Some((lo, hi, j))
                        });
                        let Some((lo, hi, close)) = counts else {
                            // A literal `{`.
                            self.edits.push((i, i + 1, "\\{".into()));
                            i += 1;
                            operand = true;
                            repeated = false;
                            continue;
                        };
                        end = close + 1;
                        if lo > 1000 || hi.is_some_and(|h| h > 1000 || h < lo) {
                            return Err(format!("invalid repeat count: `{}`", self.text(i, end)));
                        }
                        // Validity does not depend on the count; `\w{1000}` would compile to
                        // megabytes.
                        self.edits.push((i, end, "{1}".into()));
                    }
                    if self.c.get(end) == Some(&'?') {
                        end += 1;
                    }
                    if repeated {
                        return Err(format!(
                            "invalid nested repetition operator: `{}`",
                            self.text(last_op, end)
                        ));
                    }
                    if !operand {
                        return Err(format!(
                            "missing argument to repetition operator: `{}`",
                            self.text(i, end)
                        ));
                    }
                    last_op = i;
                    i = end;
                    repeated = true;
                    continue;
                }
                _ => {
                    operand = true;
                    repeated = false;
                }
            }
            i += 1;
        }
        if depth > 0 {
            return Err(format!("missing closing ): `{p}`"));
        }
        Ok(())
    }
}
