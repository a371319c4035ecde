//! Names of the functions the rewrite inserts (not spellable in CEL: `@` starts no
//! identifier), and of every function the environment has.

pub(crate) const STEP: &str = "@gateway.step";
pub(crate) const SELECT: &str = "@gateway.select";
pub(crate) const MAP: &str = "@gateway.map";
pub(crate) const SIZED: &str = "@gateway.sized";
pub(crate) const CHARGED: &str = "@gateway.charged";
pub(crate) const AUTHORIZER: &str = "@gateway.authorizer";
pub(crate) const AUTHZ_ROOT: &str = "@gateway.authzRoot";
pub(crate) const AUTHZ: &str = "@gateway.authz";
pub(crate) const QUANTITY: &str = "@gateway.quantity";
pub(crate) const IS_QUANTITY: &str = "@gateway.isQuantity";
pub(crate) const VARIABLE: &str = "@gateway.variable";
pub(crate) const GUARD: &str = "@gateway.guard";

/// The `cel` crate's built-ins and kube-cel's functions for the features enabled in
/// Cargo.toml (a test checks each resolves). A function missing here is refused at load.
const FUNCTIONS: &[&str] = &[
    // cel
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
    "value",
    "hasValue",
    "or",
    "orValue",
    "matches",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    // kube-cel: strings, format
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "strings.quote",
    "reverse",
    "format",
    // lists, sets
    "isSorted",
    "sum",
    "slice",
    "sort",
    "flatten",
    "distinct",
    "first",
    "last",
    "lists.range",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    // regex
    "find",
    "findAll",
    // ip, cidr
    "ip",
    "isIP",
    "ip.isCanonical",
    "family",
    "isLoopback",
    "isUnspecified",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "isIPv4",
    "isIPv6",
    "cidr",
    "isCIDR",
    "containsIP",
    "containsCIDR",
    "prefixLength",
    "masked",
    "isCIDRv4",
    "isCIDRv6",
    // quantity, semver (with the comparisons they share)
    "quantity",
    "isQuantity",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    // named formats
    "format.dns1123Label",
    "format.dns1123Subdomain",
    "format.dns1035Label",
    "format.dns1035LabelPrefix",
    "format.dns1123LabelPrefix",
    "format.dns1123SubdomainPrefix",
    "format.qualifiedName",
    "format.labelValue",
    "format.uri",
    "format.uuid",
    "format.byte",
    "format.date",
    "format.datetime",
    "format.named",
    "validate",
];

pub(crate) fn is_function(name: &str) -> bool {
    FUNCTIONS.contains(&name)
}

#[cfg(test)]
pub(crate) fn all() -> &'static [&'static str] {
    FUNCTIONS
}
