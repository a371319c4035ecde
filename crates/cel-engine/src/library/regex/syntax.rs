//! Go's `regexp/syntax` parser (Perl flags, as `regexp.Compile` uses it), ported for what it
//! accepts and how it words a refusal, writing the pattern out in the `regex` crate's syntax.
//! The error is `<code>: `<expr>``, Go's `syntax.Error` without its `error parsing regexp: `.

/// Go's `syntax.ErrorCode` texts.
const INVALID_CHAR_RANGE: &str = "invalid character class range";
const INVALID_ESCAPE: &str = "invalid escape sequence";
const INVALID_NAMED_CAPTURE: &str = "invalid named capture";
const INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
const INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
const INVALID_REPEAT_SIZE: &str = "invalid repeat count";
const MISSING_BRACKET: &str = "missing closing ]";
const MISSING_PAREN: &str = "missing closing )";
const MISSING_REPEAT_ARGUMENT: &str = "missing argument to repetition operator";
const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const UNEXPECTED_PAREN: &str = "unexpected )";
const NESTING_DEPTH: &str = "expression nests too deeply";

/// Go's `maxHeight` (approximated here by the depth of groups).
const MAX_DEPTH: usize = 1000;
/// Go's bound on repetition counts, alone and nested (`repeatIsValid`).
const MAX_REPEAT: i64 = 1000;

fn err(code: &str, expr: &str) -> String {
    format!("{code}: `{expr}`")
}

/// The parser's stack, as far as Go's checks need it: an expression (with the largest product
/// of `{n}` counts along any of its paths), a `(` or a `|`.
enum Item {
    Expr(i64),
    Paren,
    Bar(i64),
}

/// Translates an RE2 pattern into the `regex` crate's syntax, or Go's error.
pub(crate) fn translate(whole: &str) -> Result<String, String> {
    let mut stack: Vec<Item> = Vec::new();
    let mut out = String::with_capacity(whole.len() + 8);
    let mut depth = 0usize;
    let mut last_repeat: Option<&str> = None;
    // Flags set by `(?i)` not yet written (see `perl_flags`).
    let mut pending = String::new();
    let mut t = whole;
    while let Some(c) = t.chars().next() {
        let mut repeat: Option<&str> = None;
        let repeats = matches!(c, '*' | '+' | '?') || (c == '{' && parse_repeat(t).is_some());
        if !repeats && !matches!(c, '(' | ')' | '|') {
            out.push_str(&pending);
            pending.clear();
        }
        match c {
            '(' => {
                if t.starts_with("(?") {
                    let (rest, opens) = perl_flags(t, &mut out, &mut pending)?;
                    if opens {
                        stack.push(Item::Paren);
                        depth += 1;
                    }
                    t = rest;
                } else {
                    out.push_str(&pending);
                    pending.clear();
                    stack.push(Item::Paren);
                    depth += 1;
                    out.push('(');
                    t = &t[1..];
                }
                if depth > MAX_DEPTH {
                    return Err(err(NESTING_DEPTH, whole));
                }
            }
            '|' => {
                let w = collapse(&mut stack);
                match stack.last_mut() {
                    Some(Item::Bar(bw)) => *bw = (*bw).max(w),
                    _ => stack.push(Item::Bar(w)),
                }
                out.push('|');
                t = &t[1..];
            }
            ')' => {
                pending.clear();
                let mut w = collapse(&mut stack);
                if let Some(Item::Bar(bw)) = stack.last() {
                    w = w.max(*bw);
                    stack.pop();
                }
                match stack.pop() {
                    Some(Item::Paren) => {}
                    _ => return Err(err(UNEXPECTED_PAREN, whole)),
                }
                depth = depth.saturating_sub(1);
                stack.push(Item::Expr(w));
                out.push(')');
                t = &t[1..];
            }
            '^' | '$' | '.' => {
                stack.push(Item::Expr(1));
                out.push(c);
                t = &t[1..];
            }
            '[' => {
                t = class(t, &mut out)?;
                stack.push(Item::Expr(1));
            }
            '*' | '+' | '?' => {
                let before = t;
                let mut after = &t[1..];
                if after.starts_with('?') {
                    after = &after[1..];
                }
                check_repeat(&stack, before, after, last_repeat)?;
                out.push_str(&before[..before.len() - after.len()]);
                repeat = Some(before);
                t = after;
            }
            '{' => match parse_repeat(t) {
                None => {
                    stack.push(Item::Expr(1));
                    out.push_str("\\{");
                    t = &t[1..];
                }
                Some((min, max, rest)) => {
                    let before = t;
                    if !(0..=MAX_REPEAT).contains(&min) || max > MAX_REPEAT || (max >= 0 && min > max) {
                        return Err(err(INVALID_REPEAT_SIZE, &before[..before.len() - rest.len()]));
                    }
                    let mut after = rest;
                    let lazy = after.starts_with('?');
                    if lazy {
                        after = &after[1..];
                    }
                    check_repeat(&stack, before, after, last_repeat)?;
                    let Some(Item::Expr(w)) = stack.last_mut() else { unreachable!("checked") };
                    // repeatIsValid: `{0}` ignores its operand; `{n,}` counts n; else the max.
                    let m = if max < 0 { min } else { max };
                    let weight = if max == 0 {
                        1
                    } else if m > 0 {
                        w.saturating_mul(m)
                    } else {
                        *w
                    };
                    if (min >= 2 || max >= 2) && weight > MAX_REPEAT {
                        return Err(err(INVALID_REPEAT_SIZE, &before[..before.len() - after.len()]));
                    }
                    *w = weight;
                    match max {
                        -1 => out.push_str(&format!("{{{min},}}")),
                        m if m == min => out.push_str(&format!("{{{min}}}")),
                        m => out.push_str(&format!("{{{min},{m}}}")),
                    }
                    if lazy {
                        out.push('?');
                    }
                    repeat = Some(before);
                    t = after;
                }
            },
            '\\' => {
                t = escape_outside(t, &mut out, &mut stack)?;
            }
            c => {
                stack.push(Item::Expr(1));
                push_literal(&mut out, c);
                t = &t[c.len_utf8()..];
            }
        }
        last_repeat = repeat;
    }
    collapse(&mut stack);
    if let Some(Item::Bar(_)) = stack.last() {
        stack.pop();
    }
    if stack.iter().any(|i| matches!(i, Item::Paren)) {
        return Err(err(MISSING_PAREN, whole));
    }
    Ok(out)
}

/// Go's `concat`: the expressions above the topmost `(` or `|` become one; its weight.
fn collapse(stack: &mut Vec<Item>) -> i64 {
    let mut w = 1;
    while let Some(Item::Expr(x)) = stack.last() {
        w = w.max(*x);
        stack.pop();
    }
    w
}

/// Go's `repeat` checks: no stacked repetition operators, an operand to repeat.
fn check_repeat(stack: &[Item], before: &str, after: &str, last_repeat: Option<&str>) -> Result<(), String> {
    if let Some(last) = last_repeat {
        return Err(err(INVALID_REPEAT_OP, &last[..last.len() - after.len()]));
    }
    match stack.last() {
        Some(Item::Expr(_)) => Ok(()),
        _ => Err(err(MISSING_REPEAT_ARGUMENT, &before[..before.len() - after.len()])),
    }
}

/// Go's `parseRepeat`: `{min}`, `{min,}` (max -1) or `{min,max}`; a number too large makes
/// min -1.
fn parse_repeat(s: &str) -> Option<(i64, i64, &str)> {
    let s = s.strip_prefix('{')?;
    let (mut min, s) = parse_int(s)?;
    let (max, s) = match s.strip_prefix(',') {
        Some(s) => match s.strip_prefix('}') {
            Some(rest) => return Some((min, -1, rest)),
            None => {
                let (max, s) = parse_int(s)?;
                if max < 0 {
                    min = -1;
                }
                (max, s)
            }
        },
        None => (min, s),
    };
    let rest = s.strip_prefix('}')?;
    Some((min, max, rest))
}

/// Go's `parseInt`: decimal digits without a leading zero; -1 for a value of 1e8 or more.
fn parse_int(s: &str) -> Option<(i64, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || (digits >= 2 && s.starts_with('0')) {
        return None;
    }
    let mut n: i64 = 0;
    for b in s[..digits].bytes() {
        if n >= 100_000_000 {
            n = -1;
            break;
        }
        n = n * 10 + i64::from(b - b'0');
    }
    Some((n, &s[digits..]))
}

/// Go's `parsePerlFlags` on `(?…`: the rest, and whether a group opens.
fn perl_flags<'a>(s: &'a str, out: &mut String, pending: &mut String) -> Result<(&'a str, bool), String> {
    let b = s.as_bytes();
    let starts_with_p = b.len() > 4 && b[2] == b'P' && b[3] == b'<';
    let starts_with_name = b.len() > 3 && b[2] == b'<';
    if starts_with_p || starts_with_name {
        let expr_start = if starts_with_name { 3 } else { 4 };
        let Some(end) = s.find('>') else { return Err(err(INVALID_NAMED_CAPTURE, s)) };
        let capture = &s[..end + 1];
        let name = s.get(expr_start..end).unwrap_or("");
        if name.is_empty() || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
            return Err(err(INVALID_NAMED_CAPTURE, capture));
        }
        // Names are never read here; Go accepts a name twice, the `regex` crate does not.
        out.push_str(pending);
        pending.clear();
        out.push('(');
        return Ok((&s[end + 1..], true));
    }
    let mut t = &s[2..];
    let mut flags = String::new();
    let mut negated = false;
    let mut saw_flag = false;
    while let Some(c) = t.chars().next() {
        t = &t[c.len_utf8()..];
        match c {
            'i' | 'm' | 's' | 'U' => {
                flags.push(c);
                saw_flag = true;
            }
            '-' => {
                if negated {
                    break;
                }
                negated = true;
                flags.push('-');
                saw_flag = false;
            }
            ':' | ')' => {
                if negated && !saw_flag {
                    break;
                }
                if c == ':' {
                    out.push_str(pending);
                    pending.clear();
                    out.push_str(&format!("(?{flags}:"));
                    return Ok((t, true));
                }
                // A flag-only group sets flags for what follows: written before the next item
                // (Go repeats the item before it, as in `x(?i)*`; the `regex` crate would not).
                if !flags.is_empty() {
                    pending.push_str(&format!("(?{flags})"));
                }
                return Ok((t, false));
            }
            _ => break,
        }
    }
    Err(err(INVALID_PERL_OP, &s[..s.len() - t.len()]))
}

/// A literal code point in the `regex` crate's syntax (outside or inside a class).
fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || !c.is_ascii() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

/// Go's Perl classes (ASCII): the class body for the `regex` crate, by escape letter.
fn perl_class_body(letter: char) -> Option<&'static str> {
    Some(match letter {
        'd' => "0-9",
        'D' => "[:^digit:]",
        'w' => "[:word:]",
        'W' => "[:^word:]",
        's' => "\\t\\n\\x{C}\\r\\x{20}",
        'S' => "\\x{0}-\\x{8}\\x{B}\\x{E}-\\x{1F}\\x{21}-\\x{10FFFF}",
        _ => return None,
    })
}

/// An escape outside a class (`t` starts with `\`): the rest.
fn escape_outside<'a>(t: &'a str, out: &mut String, stack: &mut Vec<Item>) -> Result<&'a str, String> {
    let mut chars = t[1..].chars();
    match chars.next() {
        Some('A') => out.push_str("\\A"),
        Some('z') => out.push_str("\\z"),
        Some('b') => out.push_str("(?-u:\\b)"),
        Some('B') => out.push_str("(?-u:\\B)"),
        Some('C') => return Err(err(INVALID_ESCAPE, "\\C")),
        Some('Q') => {
            let body = &t[2..];
            let (lit, rest) = match body.find("\\E") {
                Some(i) => (&body[..i], &body[i + 2..]),
                None => (body, ""),
            };
            for c in lit.chars() {
                stack.push(Item::Expr(1));
                push_literal(out, c);
            }
            return Ok(rest);
        }
        Some('p') | Some('P') => {
            let (body, negated, rest) = unicode_class(t)?;
            stack.push(Item::Expr(1));
            match (body, negated) {
                (None, false) => out.push_str("[^\\x{0}-\\x{10FFFF}]"),
                (None, true) => out.push_str("[\\x{0}-\\x{10FFFF}]"),
                (Some(name), false) => out.push_str(&format!("\\p{{{name}}}")),
                (Some(name), true) => out.push_str(&format!("\\P{{{name}}}")),
            }
            return Ok(rest);
        }
        Some(c) if perl_class_body(c).is_some() => {
            stack.push(Item::Expr(1));
            out.push_str(&format!("[{}]", perl_class_body(c).unwrap_or_default()));
            return Ok(&t[2..]);
        }
        _ => {
            let (c, rest) = parse_escape(t)?;
            stack.push(Item::Expr(1));
            push_literal(out, c);
            return Ok(rest);
        }
    }
    stack.push(Item::Expr(1));
    Ok(&t[2..])
}

/// Go's `parseEscape` (`s` starts with `\`): the code point and the rest.
fn parse_escape(s: &str) -> Result<(char, &str), String> {
    let t = &s[1..];
    let Some(c) = t.chars().next() else { return Err(err(TRAILING_BACKSLASH, "")) };
    let mut t = &t[c.len_utf8()..];
    let invalid = |t: &str| Err(err(INVALID_ESCAPE, &s[..s.len() - t.len()]));
    let octal = |b: u8| (b'0'..=b'7').contains(&b);
    match c {
        '1'..='7' if !t.as_bytes().first().is_some_and(|b| octal(*b)) => invalid(t),
        '0'..='7' => {
            let mut r = c as u32 - '0' as u32;
            for _ in 1..3 {
                match t.as_bytes().first() {
                    Some(b) if octal(*b) => {
                        r = r * 8 + u32::from(b - b'0');
                        t = &t[1..];
                    }
                    _ => break,
                }
            }
            Ok((char::from_u32(r).unwrap_or('\u{0}'), t))
        }
        'x' => {
            let Some(c) = t.chars().next() else { return invalid(t) };
            t = &t[c.len_utf8()..];
            if c == '{' {
                let mut r: u32 = 0;
                let mut nhex = 0;
                loop {
                    let Some(c) = t.chars().next() else { return invalid(t) };
                    t = &t[c.len_utf8()..];
                    if c == '}' {
                        break;
                    }
                    let Some(v) = c.to_digit(16) else { return invalid(t) };
                    r = r * 16 + v;
                    if r > 0x10FFFF {
                        return invalid(t);
                    }
                    nhex += 1;
                }
                if nhex == 0 {
                    return invalid(t);
                }
                // A surrogate is a code point Go accepts and never matches in valid text.
                return Ok((char::from_u32(r).unwrap_or('\u{FFFD}'), t));
            }
            let x = c.to_digit(16);
            let c2 = t.chars().next();
            if let Some(c2) = c2 {
                t = &t[c2.len_utf8()..];
            }
            match (x, c2.and_then(|c| c.to_digit(16))) {
                (Some(x), Some(y)) => Ok((char::from_u32(x * 16 + y).unwrap_or('\u{0}'), t)),
                _ => invalid(t),
            }
        }
        'a' => Ok(('\u{7}', t)),
        'f' => Ok(('\u{c}', t)),
        'n' => Ok(('\n', t)),
        'r' => Ok(('\r', t)),
        't' => Ok(('\t', t)),
        'v' => Ok(('\u{b}', t)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c, t)),
        _ => invalid(t),
    }
}

/// Go's `canonicalName`: first letter upper, the rest lower, `_ - space` dropped.
fn canonical_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut first = true;
    for c in name.chars() {
        if c == '_' || c == '-' || c == ' ' {
            continue;
        }
        if first {
            out.push(c.to_ascii_uppercase());
            first = false;
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Go's `unicode.Categories` keys.
const CATEGORIES: &[&str] = &[
    "C", "Cc", "Cf", "Cn", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn", "N", "Nd",
    "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm", "So", "Z", "Zl", "Zp",
    "Zs",
];

/// Go's `unicode.CategoryAliases`.
const CATEGORY_ALIASES: &[(&str, &str)] = &[
    ("Cased_Letter", "LC"),
    ("Close_Punctuation", "Pe"),
    ("Combining_Mark", "M"),
    ("Connector_Punctuation", "Pc"),
    ("Control", "Cc"),
    ("Currency_Symbol", "Sc"),
    ("Dash_Punctuation", "Pd"),
    ("Decimal_Number", "Nd"),
    ("Enclosing_Mark", "Me"),
    ("Final_Punctuation", "Pf"),
    ("Format", "Cf"),
    ("Initial_Punctuation", "Pi"),
    ("Letter", "L"),
    ("Letter_Number", "Nl"),
    ("Line_Separator", "Zl"),
    ("Lowercase_Letter", "Ll"),
    ("Mark", "M"),
    ("Math_Symbol", "Sm"),
    ("Modifier_Letter", "Lm"),
    ("Modifier_Symbol", "Sk"),
    ("Nonspacing_Mark", "Mn"),
    ("Number", "N"),
    ("Open_Punctuation", "Ps"),
    ("Other", "C"),
    ("Other_Letter", "Lo"),
    ("Other_Number", "No"),
    ("Other_Punctuation", "Po"),
    ("Other_Symbol", "So"),
    ("Paragraph_Separator", "Zp"),
    ("Private_Use", "Co"),
    ("Punctuation", "P"),
    ("Separator", "Z"),
    ("Space_Separator", "Zs"),
    ("Spacing_Mark", "Mc"),
    ("Surrogate", "Cs"),
    ("Symbol", "S"),
    ("Titlecase_Letter", "Lt"),
    ("Unassigned", "Cn"),
    ("Uppercase_Letter", "Lu"),
    ("cntrl", "Cc"),
    ("digit", "Nd"),
    ("punct", "P"),
];

/// Go 1.27's `unicode.Scripts` keys (Unicode 17).
const SCRIPTS: &[&str] = &[
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Beria_Erfe",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Garay",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Gurung_Khema",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Kirat_Rai",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Ol_Onal",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "Sidetic",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Sunuwar",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Tai_Yo",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Todhri",
    "Tolong_Siki",
    "Toto",
    "Tulu_Tigalari",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
];

/// Go's `unicodeTable`: the `regex` crate's name for a Go class name (`None` for `Cs`, which
/// matches nothing in valid UTF-8 and which the crate refuses), or not a Go name at all.
fn unicode_table(name: &str) -> Option<Option<&'static str>> {
    let canonical = canonical_name(name);
    let found: &'static str = match canonical.as_str() {
        "Any" => "Any",
        "Assigned" => "Assigned",
        "Ascii" => "ASCII",
        "Lc" => "LC",
        c => CATEGORIES
            .iter()
            .chain(SCRIPTS.iter())
            .find(|k| **k == c)
            .copied()
            .or_else(|| CATEGORY_ALIASES.iter().find(|(k, _)| canonical_name(k) == c).map(|(_, v)| *v))
            .or_else(|| SCRIPTS.iter().find(|k| canonical_name(k) == c).copied())?,
    };
    Some(if found == "Cs" { None } else { Some(found) })
}

type UnicodeClass<'a> = (Option<&'static str>, bool, &'a str);

/// Go's `parseUnicodeClass` (`s` starts with `\p` or `\P`): the class, whether negated, the rest.
fn unicode_class(s: &str) -> Result<UnicodeClass<'_>, String> {
    let mut negated = s.as_bytes()[1] == b'P';
    let t = &s[2..];
    let Some(c) = t.chars().next() else { return Err(err(INVALID_CHAR_RANGE, s)) };
    let (seq, mut name, rest) = if c != '{' {
        let len = 2 + c.len_utf8();
        (&s[..len], &s[2..len], &s[len..])
    } else {
        let Some(end) = s.find('}') else { return Err(err(INVALID_CHAR_RANGE, s)) };
        (&s[..end + 1], &s[3..end], &s[end + 1..])
    };
    if let Some(n) = name.strip_prefix('^') {
        negated = !negated;
        name = n;
    }
    match unicode_table(name) {
        Some(table) => Ok((table, negated, rest)),
        None => Err(err(INVALID_CHAR_RANGE, seq)),
    }
}

/// Go's POSIX class names.
const POSIX: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
    "upper", "word", "xdigit",
];

/// Go's `parseClass` (`s` starts with `[`): writes the class, returns the rest.
fn class<'a>(s: &'a str, out: &mut String) -> Result<&'a str, String> {
    let mut t = &s[1..];
    let mut negated = false;
    if let Some(rest) = t.strip_prefix('^') {
        negated = true;
        t = rest;
    }
    let mut body = String::new();
    let mut first = true;
    while t.is_empty() || !t.starts_with(']') || first {
        first = false;
        if t.len() > 2 && t.starts_with("[:") {
            if let Some(i) = t[2..].find(":]") {
                let name = &t[..i + 4];
                let inner = &name[2..name.len() - 2];
                let base = inner.strip_prefix('^').unwrap_or(inner);
                if !POSIX.contains(&base) {
                    return Err(err(INVALID_CHAR_RANGE, name));
                }
                body.push_str(name);
                t = &t[name.len()..];
                continue;
            }
        }
        if t.starts_with("\\p") || t.starts_with("\\P") {
            let (table, neg, rest) = unicode_class(t)?;
            match (table, neg) {
                (None, false) => {}
                (None, true) => body.push_str("\\x{0}-\\x{10FFFF}"),
                (Some(name), false) => body.push_str(&format!("\\p{{{name}}}")),
                (Some(name), true) => body.push_str(&format!("\\P{{{name}}}")),
            }
            t = rest;
            continue;
        }
        if let Some(letter) = t.strip_prefix('\\').and_then(|r| r.chars().next()) {
            if let Some(class_body) = perl_class_body(letter) {
                body.push_str(class_body);
                t = &t[2..];
                continue;
            }
        }
        let range_start = t;
        let (lo, rest) = class_char(t, s)?;
        t = rest;
        let mut hi = lo;
        if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
            let (h, rest) = class_char(&t[1..], s)?;
            t = rest;
            hi = h;
            if hi < lo {
                return Err(err(INVALID_CHAR_RANGE, &range_start[..range_start.len() - t.len()]));
            }
        }
        push_literal(&mut body, lo);
        if hi != lo {
            body.push('-');
            push_literal(&mut body, hi);
        }
    }
    t = &t[1..];
    match (body.is_empty(), negated) {
        (true, false) => out.push_str("[^\\x{0}-\\x{10FFFF}]"),
        (true, true) => out.push_str("[\\x{0}-\\x{10FFFF}]"),
        (false, false) => out.push_str(&format!("[{body}]")),
        (false, true) => out.push_str(&format!("[^{body}]")),
    }
    Ok(t)
}

/// Go's `parseClassChar`.
fn class_char<'a>(t: &'a str, whole_class: &str) -> Result<(char, &'a str), String> {
    match t.chars().next() {
        None => Err(err(MISSING_BRACKET, whole_class)),
        Some('\\') => parse_escape(t),
        Some(c) => Ok((c, &t[c.len_utf8()..])),
    }
}
