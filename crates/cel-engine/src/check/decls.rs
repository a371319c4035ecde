//! The declarations of every function of the API server's 1.36 environment, as the checker
//! sees them: cel-go's standard library (`common/stdlib/standard.go`), optionals
//! (`cel/library.go`), `ext.Strings` v2, `ext.Sets`, `ext.Lists` v3, two-variable
//! comprehensions, and the Kubernetes libraries of `pkg/cel/library` (lists v0, regex, url,
//! ip, cidr, quantity, semver v1, format, authz with selectors).
//!
//! One overload a line: `name (A, B) -> R` for a global overload, `name R.(A) -> R` for a
//! member one (the receiver before the dot). A single capital letter is a type parameter;
//! `net.IP` and `net.CIDR` are opaque types, other dotted names object types.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::types::{collect_params, CheckedType};

/// One overload of a function.
#[derive(Clone, Debug)]
pub struct Overload {
    /// Receiver style (`x.f(y)`), the receiver being `args[0]`.
    pub member: bool,
    pub args: Vec<CheckedType>,
    pub result: CheckedType,
    /// The type parameters the signature mentions.
    pub params: Vec<String>,
}

const STANDARD: &str = "
_?_:_ (bool, A, A) -> A
_&&_ (bool, bool) -> bool
_||_ (bool, bool) -> bool
!_ (bool) -> bool
@not_strictly_false (bool) -> bool
_==_ (A, A) -> bool
_!=_ (A, A) -> bool
_+_ (bytes, bytes) -> bytes
_+_ (double, double) -> double
_+_ (duration, duration) -> duration
_+_ (duration, timestamp) -> timestamp
_+_ (timestamp, duration) -> timestamp
_+_ (int, int) -> int
_+_ (list(A), list(A)) -> list(A)
_+_ (string, string) -> string
_+_ (uint, uint) -> uint
_/_ (double, double) -> double
_/_ (int, int) -> int
_/_ (uint, uint) -> uint
_%_ (int, int) -> int
_%_ (uint, uint) -> uint
_*_ (double, double) -> double
_*_ (int, int) -> int
_*_ (uint, uint) -> uint
-_ (double) -> double
-_ (int) -> int
_-_ (double, double) -> double
_-_ (duration, duration) -> duration
_-_ (int, int) -> int
_-_ (timestamp, duration) -> timestamp
_-_ (timestamp, timestamp) -> duration
_-_ (uint, uint) -> uint
_[_] (list(A), int) -> A
_[_] (map(A, B), A) -> B
@in (A, list(A)) -> bool
@in (A, map(A, B)) -> bool
size (bytes) -> int
size bytes.() -> int
size (list(A)) -> int
size list(A).() -> int
size (map(A, B)) -> int
size map(A, B).() -> int
size (string) -> int
size string.() -> int
type (A) -> type(A)
bool (bool) -> bool
bool (string) -> bool
bytes (bytes) -> bytes
bytes (string) -> bytes
double (double) -> double
double (int) -> double
double (string) -> double
double (uint) -> double
duration (duration) -> duration
duration (string) -> duration
dyn (A) -> dyn
int (int) -> int
int (double) -> int
int (duration) -> int
int (string) -> int
int (timestamp) -> int
int (uint) -> int
string (string) -> string
string (bool) -> string
string (bytes) -> string
string (double) -> string
string (duration) -> string
string (int) -> string
string (timestamp) -> string
string (uint) -> string
timestamp (timestamp) -> timestamp
timestamp (int) -> timestamp
timestamp (string) -> timestamp
uint (uint) -> uint
uint (double) -> uint
uint (int) -> uint
uint (string) -> uint
contains string.(string) -> bool
endsWith string.(string) -> bool
startsWith string.(string) -> bool
matches (string, string) -> bool
matches string.(string) -> bool
getFullYear timestamp.() -> int
getFullYear timestamp.(string) -> int
getMonth timestamp.() -> int
getMonth timestamp.(string) -> int
getDayOfYear timestamp.() -> int
getDayOfYear timestamp.(string) -> int
getDayOfMonth timestamp.() -> int
getDayOfMonth timestamp.(string) -> int
getDate timestamp.() -> int
getDate timestamp.(string) -> int
getDayOfWeek timestamp.() -> int
getDayOfWeek timestamp.(string) -> int
getHours timestamp.() -> int
getHours timestamp.(string) -> int
getHours duration.() -> int
getMinutes timestamp.() -> int
getMinutes timestamp.(string) -> int
getMinutes duration.() -> int
getSeconds timestamp.() -> int
getSeconds timestamp.(string) -> int
getSeconds duration.() -> int
getMilliseconds timestamp.() -> int
getMilliseconds timestamp.(string) -> int
getMilliseconds duration.() -> int
";

const OPTIONAL: &str = "
optional.of (V) -> optional_type(V)
optional.ofNonZeroValue (V) -> optional_type(V)
optional.none () -> optional_type(V)
value optional_type(V).() -> V
hasValue optional_type(V).() -> bool
or optional_type(V).(optional_type(V)) -> optional_type(V)
orValue optional_type(V).(V) -> V
_?._ (dyn, string) -> optional_type(V)
_[?_] (list(V), int) -> optional_type(V)
_[?_] (optional_type(list(V)), int) -> optional_type(V)
_[?_] (map(K, V), K) -> optional_type(V)
_[?_] (optional_type(map(K, V)), K) -> optional_type(V)
_[_] (optional_type(list(V)), int) -> optional_type(V)
_[_] (optional_type(map(K, V)), K) -> optional_type(V)
last list(V).() -> optional_type(V)
first list(V).() -> optional_type(V)
optional.unwrap (list(optional_type(V))) -> list(V)
unwrapOpt list(optional_type(V)).() -> list(V)
";

const STRINGS: &str = "
charAt string.(int) -> string
indexOf string.(string) -> int
indexOf string.(string, int) -> int
lastIndexOf string.(string) -> int
lastIndexOf string.(string, int) -> int
lowerAscii string.() -> string
replace string.(string, string) -> string
replace string.(string, string, int) -> string
split string.(string) -> list(string)
split string.(string, int) -> list(string)
substring string.(int) -> string
substring string.(int, int) -> string
trim string.() -> string
upperAscii string.() -> string
format string.(list(dyn)) -> string
strings.quote (string) -> string
join list(string).() -> string
join list(string).(string) -> string
";

const SETS: &str = "
sets.contains (list(T), list(T)) -> bool
sets.equivalent (list(T), list(T)) -> bool
sets.intersects (list(T), list(T)) -> bool
";

const EXT_LISTS: &str = "
slice list(T).(int, int) -> list(T)
flatten list(list(T)).() -> list(T)
flatten list(dyn).(int) -> list(dyn)
lists.range (int) -> list(int)
reverse list(T).() -> list(T)
distinct list(T).() -> list(T)
";

const TWO_VAR: &str = "
cel.@mapInsert (map(K, V), K, V) -> map(K, V)
cel.@mapInsert (map(K, V), map(K, V)) -> map(K, V)
";

const K8S_LISTS: &str = "
indexOf list(A).(A) -> int
lastIndexOf list(A).(A) -> int
";

const REGEX: &str = "
find string.(string) -> string
findAll string.(string) -> list(string)
findAll string.(string, int) -> list(string)
";

const URL: &str = "
url (string) -> kubernetes.URL
getScheme kubernetes.URL.() -> string
getHost kubernetes.URL.() -> string
getHostname kubernetes.URL.() -> string
getPort kubernetes.URL.() -> string
getEscapedPath kubernetes.URL.() -> string
getQuery kubernetes.URL.() -> map(string, list(string))
isURL (string) -> bool
";

const IP: &str = "
ip (string) -> net.IP
family net.IP.() -> int
ip.isCanonical (string) -> bool
isUnspecified net.IP.() -> bool
isLoopback net.IP.() -> bool
isLinkLocalMulticast net.IP.() -> bool
isLinkLocalUnicast net.IP.() -> bool
isGlobalUnicast net.IP.() -> bool
isIP (string) -> bool
string (net.IP) -> string
cidr (string) -> net.CIDR
containsIP net.CIDR.(string) -> bool
containsIP net.CIDR.(net.IP) -> bool
containsCIDR net.CIDR.(string) -> bool
containsCIDR net.CIDR.(net.CIDR) -> bool
ip net.CIDR.() -> net.IP
prefixLength net.CIDR.() -> int
masked net.CIDR.() -> net.CIDR
isCIDR (string) -> bool
string (net.CIDR) -> string
";

// `sign` is declared global in k8s (`cel.Overload("quantity_sign", ...)`): `sign(q)`.
const QUANTITY: &str = "
quantity (string) -> kubernetes.Quantity
isQuantity (string) -> bool
sign (kubernetes.Quantity) -> int
isGreaterThan kubernetes.Quantity.(kubernetes.Quantity) -> bool
isLessThan kubernetes.Quantity.(kubernetes.Quantity) -> bool
compareTo kubernetes.Quantity.(kubernetes.Quantity) -> int
asApproximateFloat kubernetes.Quantity.() -> double
asInteger kubernetes.Quantity.() -> int
isInteger kubernetes.Quantity.() -> bool
add kubernetes.Quantity.(kubernetes.Quantity) -> kubernetes.Quantity
add kubernetes.Quantity.(int) -> kubernetes.Quantity
sub kubernetes.Quantity.(kubernetes.Quantity) -> kubernetes.Quantity
sub kubernetes.Quantity.(int) -> kubernetes.Quantity
";

const SEMVER: &str = "
semver (string) -> kubernetes.Semver
semver (string, bool) -> kubernetes.Semver
isSemver (string) -> bool
isSemver (string, bool) -> bool
isGreaterThan kubernetes.Semver.(kubernetes.Semver) -> bool
isLessThan kubernetes.Semver.(kubernetes.Semver) -> bool
compareTo kubernetes.Semver.(kubernetes.Semver) -> int
major kubernetes.Semver.() -> int
minor kubernetes.Semver.() -> int
patch kubernetes.Semver.() -> int
";

const FORMAT: &str = "
validate kubernetes.NamedFormat.(string) -> optional_type(list(string))
format.named (string) -> optional_type(kubernetes.NamedFormat)
";

const FORMAT_NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

const AUTHZ: &str = "
path kubernetes.authorization.Authorizer.(string) -> kubernetes.authorization.PathCheck
group kubernetes.authorization.Authorizer.(string) -> kubernetes.authorization.GroupCheck
serviceAccount kubernetes.authorization.Authorizer.(string, string) -> kubernetes.authorization.Authorizer
resource kubernetes.authorization.GroupCheck.(string) -> kubernetes.authorization.ResourceCheck
subresource kubernetes.authorization.ResourceCheck.(string) -> kubernetes.authorization.ResourceCheck
namespace kubernetes.authorization.ResourceCheck.(string) -> kubernetes.authorization.ResourceCheck
name kubernetes.authorization.ResourceCheck.(string) -> kubernetes.authorization.ResourceCheck
check kubernetes.authorization.PathCheck.(string) -> kubernetes.authorization.Decision
check kubernetes.authorization.ResourceCheck.(string) -> kubernetes.authorization.Decision
errored kubernetes.authorization.Decision.() -> bool
error kubernetes.authorization.Decision.() -> string
allowed kubernetes.authorization.Decision.() -> bool
reason kubernetes.authorization.Decision.() -> string
fieldSelector kubernetes.authorization.ResourceCheck.(string) -> kubernetes.authorization.ResourceCheck
labelSelector kubernetes.authorization.ResourceCheck.(string) -> kubernetes.authorization.ResourceCheck
";

/// The operand types of `<`, `<=`, `>`, `>=` (cross-type numeric comparisons enabled).
const ORDERED: [(&str, &str); 14] = [
    ("bool", "bool"),
    ("int", "int"),
    ("int", "double"),
    ("int", "uint"),
    ("uint", "uint"),
    ("uint", "double"),
    ("uint", "int"),
    ("double", "double"),
    ("double", "int"),
    ("double", "uint"),
    ("string", "string"),
    ("bytes", "bytes"),
    ("timestamp", "timestamp"),
    ("duration", "duration"),
];

/// The types `sort`, `@sortByAssociatedKeys` (ext lists) and `isSorted`, `min`, `max`
/// (k8s lists) are declared for; `sum` for the first four of `SUMMABLE`.
const COMPARABLE: [&str; 8] = ["int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes"];
const SUMMABLE: [&str; 4] = ["int", "uint", "double", "duration"];

/// The function table: name → overloads, in declaration order.
pub fn functions() -> &'static HashMap<String, Vec<Overload>> {
    static TABLE: OnceLock<HashMap<String, Vec<Overload>>> = OnceLock::new();
    TABLE.get_or_init(build)
}

fn build() -> HashMap<String, Vec<Overload>> {
    let mut text = String::new();
    // The order in which k8s `environment/base.go` adds the libraries: a function declared by
    // two of them (`indexOf`, `lastIndexOf`) has its overloads tried in that order.
    for part in [
        STANDARD, URL, REGEX, K8S_LISTS, AUTHZ, OPTIONAL, QUANTITY, STRINGS, SETS, IP, FORMAT, TWO_VAR,
        SEMVER, EXT_LISTS,
    ] {
        text.push_str(part);
    }
    for op in ["_<_", "_<=_", "_>_", "_>=_"] {
        for (a, b) in ORDERED {
            text.push_str(&format!("{op} ({a}, {b}) -> bool\n"));
        }
    }
    for t in COMPARABLE {
        text.push_str(&format!("sort list({t}).() -> list({t})\n"));
        text.push_str(&format!("@sortByAssociatedKeys list(T).(list({t})) -> list(T)\n"));
        text.push_str(&format!("isSorted list({t}).() -> bool\n"));
        text.push_str(&format!("max list({t}).() -> {t}\n"));
        text.push_str(&format!("min list({t}).() -> {t}\n"));
    }
    for t in SUMMABLE {
        text.push_str(&format!("sum list({t}).() -> {t}\n"));
    }
    for n in FORMAT_NAMES {
        text.push_str(&format!("format.{n} () -> kubernetes.NamedFormat\n"));
    }
    table(&text)
}

/// The table of the declarations `text` holds, one a line.
fn table(text: &str) -> HashMap<String, Vec<Overload>> {
    let mut table: HashMap<String, Vec<Overload>> = HashMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, sig) = line.split_once(' ').expect("a declaration line");
        let overload = parse_signature(sig).unwrap_or_else(|| panic!("bad declaration: {line}"));
        table.entry(name.to_owned()).or_default().push(overload);
    }
    table
}

/// The functions only a mutation's environment declares (k8s `pkg/cel/library/jsonpatch.go`,
/// added with the patch types by `pkg/admission/plugin/cel/compile.go`).
const JSONPATCH: &str = "
jsonpatch.escapeKey (string) -> string
";

/// The function table of the mutation environment's own libraries.
pub fn mutation_functions() -> &'static HashMap<String, Vec<Overload>> {
    static TABLE: OnceLock<HashMap<String, Vec<Overload>>> = OnceLock::new();
    TABLE.get_or_init(|| table(JSONPATCH))
}

/// The identifiers that name types (cel-go's `stdTypes` and the types the libraries register).
pub fn type_identifier(name: &str) -> Option<CheckedType> {
    let t = match name {
        "bool" => CheckedType::Bool,
        "bytes" => CheckedType::Bytes,
        "double" => CheckedType::Double,
        "google.protobuf.Duration" => CheckedType::Duration,
        "int" => CheckedType::Int,
        "list" => CheckedType::list(CheckedType::param("A")),
        "map" => CheckedType::map(CheckedType::param("A"), CheckedType::param("B")),
        "null_type" => CheckedType::Null,
        "string" => CheckedType::String,
        "google.protobuf.Timestamp" => CheckedType::Timestamp,
        "type" => CheckedType::Type(None),
        "uint" => CheckedType::Uint,
        "optional_type" => CheckedType::optional(CheckedType::Dyn),
        // The opaque types the IP and CIDR libraries register are names; the object types of
        // the other libraries (`kubernetes.Quantity`, …) are not (`undeclared reference`).
        "net.IP" | "net.CIDR" => CheckedType::Opaque(name.to_owned(), Vec::new()),
        "google.protobuf.Empty" => CheckedType::Struct(name.to_owned()),
        _ if undefined_at_runtime(name) => CheckedType::Dyn,
        _ => return None,
    };
    Some(CheckedType::type_of(t))
}

/// Protobuf well-known types the checker resolves as type names but the API server's type
/// provider cannot produce at runtime: a reference fails the program
/// (`reference to undefined type: google.protobuf.Int64Value`).
pub fn undefined_at_runtime(name: &str) -> bool {
    matches!(
        name,
        "google.protobuf.Any"
            | "google.protobuf.Value"
            | "google.protobuf.Struct"
            | "google.protobuf.ListValue"
            | "google.protobuf.BoolValue"
            | "google.protobuf.BytesValue"
            | "google.protobuf.DoubleValue"
            | "google.protobuf.FloatValue"
            | "google.protobuf.Int32Value"
            | "google.protobuf.Int64Value"
            | "google.protobuf.StringValue"
            | "google.protobuf.UInt32Value"
            | "google.protobuf.UInt64Value"
    )
}

fn parse_signature(sig: &str) -> Option<Overload> {
    let mut p = Parser { s: sig.as_bytes(), i: 0 };
    let (member, mut args) = if p.peek() == Some(b'(') {
        (false, Vec::new())
    } else {
        let receiver = p.ty()?;
        p.expect(b'.')?;
        (true, vec![receiver])
    };
    p.expect(b'(')?;
    p.skip_ws();
    if p.peek() != Some(b')') {
        loop {
            args.push(p.ty()?);
            p.skip_ws();
            if p.peek() == Some(b',') {
                p.i += 1;
                continue;
            }
            break;
        }
    }
    p.expect(b')')?;
    p.skip_ws();
    p.expect(b'-')?;
    p.expect(b'>')?;
    let result = p.ty()?;
    let mut params = Vec::new();
    for a in &args {
        collect_params(a, &mut params);
    }
    collect_params(&result, &mut params);
    Some(Overload { member, args, result, params })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.skip_ws();
        (self.peek() == Some(c)).then(|| self.i += 1)
    }

    fn ty(&mut self) -> Option<CheckedType> {
        self.skip_ws();
        let start = self.i;
        while let Some(c) = self.peek() {
            let dot_word = c == b'.' && self.s.get(self.i + 1).is_some_and(|n| n.is_ascii_alphabetic());
            if c.is_ascii_alphanumeric() || c == b'_' || dot_word {
                self.i += 1;
            } else {
                break;
            }
        }
        let name = std::str::from_utf8(&self.s[start..self.i]).ok()?.to_owned();
        let mut params = Vec::new();
        if self.peek() == Some(b'(') && !name.is_empty() {
            self.i += 1;
            loop {
                params.push(self.ty()?);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        let mut ps = params.into_iter();
        Some(match name.as_str() {
            "dyn" => CheckedType::Dyn,
            "null_type" => CheckedType::Null,
            "bool" => CheckedType::Bool,
            "int" => CheckedType::Int,
            "uint" => CheckedType::Uint,
            "double" => CheckedType::Double,
            "string" => CheckedType::String,
            "bytes" => CheckedType::Bytes,
            "duration" => CheckedType::Duration,
            "timestamp" => CheckedType::Timestamp,
            "list" => CheckedType::list(ps.next()?),
            "map" => CheckedType::map(ps.next()?, ps.next()?),
            "optional_type" => CheckedType::optional(ps.next()?),
            "type" => CheckedType::Type(ps.next().map(Box::new)),
            "net.IP" | "net.CIDR" => CheckedType::Opaque(name, Vec::new()),
            n if n.len() == 1 && n.as_bytes()[0].is_ascii_uppercase() => CheckedType::Param(name),
            n if n.contains('.') => CheckedType::Struct(name),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_parses() {
        let table = functions();
        assert_eq!(table["_+_"].len(), 9);
        let sort = &table["sort"];
        assert_eq!(sort.len(), 8);
        assert!(sort[0].member);
        assert_eq!(sort[0].args, vec![CheckedType::list(CheckedType::Int)]);
        let or = &table["cel.@mapInsert"][0];
        assert_eq!(or.params, vec!["K".to_owned(), "V".to_owned()]);
        let path = &table["path"][0];
        assert_eq!(path.args[0], CheckedType::Struct("kubernetes.authorization.Authorizer".into()));
        assert_eq!(table["format.dns1123Label"][0].args.len(), 0);
        assert_eq!(table["getQuery"][0].result.format(), "map(string, list(string))");
    }
}
