//! The variables and object types an expression is checked against: the admission
//! environment of k8s `pkg/admission/plugin/cel/compile.go` (`BuildRequestType`,
//! `BuildNamespaceType`, `createEnvForOpts`), the composited `variables`, and the patch types
//! of a mutation (`hasPatchTypes`, [`TypeEnv::with_mutation`]).

use std::collections::HashMap;

use super::decls;
use super::types::CheckedType;
use super::variable_type;

/// The variables (and object types) an expression is checked against.
#[derive(Clone, Debug, Default)]
pub struct TypeEnv {
    pub(super) variables: HashMap<String, CheckedType>,
    pub(super) objects: HashMap<String, HashMap<String, CheckedType>>,
    /// The mutation environment's type resolver and `jsonpatch` library are declared.
    pub(super) mutation: bool,
}

/// The name of the object type of `variables` (k8s `composition.go`).
pub const VARIABLES_TYPE: &str = "kubernetes.variables";

impl TypeEnv {
    pub fn new() -> TypeEnv {
        TypeEnv::default()
    }

    /// Declares a variable (its name may be dotted: `authorizer.requestResource`).
    pub fn variable(&mut self, name: &str, t: CheckedType) -> &mut TypeEnv {
        self.variables.insert(name.to_owned(), t);
        self
    }

    /// Declares an object type and its fields (a Kubernetes `DeclType`).
    pub fn object(&mut self, name: &str, fields: &[(&str, CheckedType)]) -> &mut TypeEnv {
        let fields = fields.iter().map(|(n, t)| ((*n).to_owned(), t.clone())).collect();
        self.objects.insert(name.to_owned(), fields);
        self
    }

    /// The admission environment of k8s `pkg/admission/plugin/cel/compile.go`: `object`,
    /// `oldObject` (dyn), `request` (`kubernetes.AdmissionRequest`), `namespaceObject`
    /// (`kubernetes.Namespace`), `params` (dyn) when the policy has a paramKind, `authorizer`
    /// and `authorizer.requestResource` when an authorizer is available.
    pub fn admission(has_params: bool, has_authorizer: bool) -> TypeEnv {
        let mut env = TypeEnv::new();
        let s = |n: &str| CheckedType::Struct(n.to_owned());
        let string = || CheckedType::String;
        let strings = || CheckedType::list(CheckedType::String);
        env.object(
            "kubernetes.GroupVersionKind",
            &[("group", string()), ("version", string()), ("kind", string())],
        );
        env.object(
            "kubernetes.GroupVersionResource",
            &[("group", string()), ("version", string()), ("resource", string())],
        );
        env.object(
            "kubernetes.UserInfo",
            &[
                ("username", string()),
                ("uid", string()),
                ("groups", strings()),
                ("extra", CheckedType::map(CheckedType::String, strings())),
            ],
        );
        env.object(
            "kubernetes.AdmissionRequest",
            &[
                ("kind", s("kubernetes.GroupVersionKind")),
                ("resource", s("kubernetes.GroupVersionResource")),
                ("subResource", string()),
                ("requestKind", s("kubernetes.GroupVersionKind")),
                ("requestResource", s("kubernetes.GroupVersionResource")),
                ("requestSubResource", string()),
                ("name", string()),
                ("namespace", string()),
                ("operation", string()),
                ("userInfo", s("kubernetes.UserInfo")),
                ("dryRun", CheckedType::Bool),
                ("options", CheckedType::Dyn),
            ],
        );
        env.object("kubernetes.NamespaceSpec", &[("finalizers", strings())]);
        env.object(
            "kubernetes.NamespaceCondition",
            &[
                ("status", string()),
                ("type", string()),
                ("lastTransitionTime", CheckedType::Timestamp),
                ("message", string()),
                ("reason", string()),
            ],
        );
        env.object(
            "kubernetes.NamespaceStatus",
            &[("conditions", CheckedType::list(s("kubernetes.NamespaceCondition"))), ("phase", string())],
        );
        let labels = || CheckedType::map(CheckedType::String, CheckedType::String);
        env.object(
            "kubernetes.NamespaceMetadata",
            &[
                ("name", string()),
                ("generateName", string()),
                ("namespace", string()),
                ("labels", labels()),
                ("annotations", labels()),
                ("UID", string()),
                ("creationTimestamp", CheckedType::Timestamp),
                ("deletionGracePeriodSeconds", CheckedType::Int),
                ("deletionTimestamp", CheckedType::Timestamp),
                ("generation", CheckedType::Int),
                ("resourceVersion", string()),
                ("finalizers", strings()),
            ],
        );
        env.object(
            "kubernetes.Namespace",
            &[
                ("metadata", s("kubernetes.NamespaceMetadata")),
                ("spec", s("kubernetes.NamespaceSpec")),
                ("status", s("kubernetes.NamespaceStatus")),
            ],
        );
        env.variable("object", CheckedType::Dyn);
        env.variable("oldObject", CheckedType::Dyn);
        env.variable("namespaceObject", s("kubernetes.Namespace"));
        env.variable("request", s("kubernetes.AdmissionRequest"));
        if has_params {
            env.variable("params", CheckedType::Dyn);
        }
        if has_authorizer {
            env.variable("authorizer", s("kubernetes.authorization.Authorizer"));
            env.variable("authorizer.requestResource", s("kubernetes.authorization.ResourceCheck"));
        }
        env
    }

    /// Declares `variables` (an object of type `kubernetes.variables`, no fields yet), as the
    /// composited compiler of a policy does.
    pub fn with_variables(&mut self) -> &mut TypeEnv {
        self.objects.entry(VARIABLES_TYPE.to_owned()).or_default();
        self.variables.insert("variables".to_owned(), CheckedType::Struct(VARIABLES_TYPE.to_owned()));
        self
    }

    /// Adds `variables.<name>` of the type of that variable's checked expression, converted as
    /// Kubernetes converts it ([`variable_type`]); `None` when its expression failed to compile
    /// (it is then `dyn`).
    pub fn composited_variable(&mut self, name: &str, output: Option<&CheckedType>) -> &mut TypeEnv {
        self.with_variables();
        let t = variable_type(output);
        self.objects.entry(VARIABLES_TYPE.to_owned()).or_default().insert(name.to_owned(), t);
        self
    }

    /// Declares what k8s `pkg/admission/plugin/cel/compile.go` adds for a
    /// MutatingAdmissionPolicy's mutations (`hasPatchTypes`, never for its matchConditions or
    /// variables): the type resolver of `pkg/cel/mutation/typeresolver.go` (`JSONPatch`, and
    /// `Object` and every `Object.<field>…` name, see [`crate::mutation`]) and the
    /// `jsonpatch.escapeKey` function of `pkg/cel/library/jsonpatch.go`.
    pub fn with_mutation(&mut self) -> &mut TypeEnv {
        self.mutation = true;
        self
    }

    /// Whether the mutation environment's type resolver resolves `name` here.
    pub(super) fn resolves(&self, name: &str) -> bool {
        self.mutation && crate::mutation::is_patch_type(name)
    }

    /// The field types of an object type this environment declares (`None` for a name it
    /// does not know): a declared object's fields; for a type of the mutation resolver, the
    /// type its `Field` gives any name.
    pub(super) fn field_type(&self, object: &str, field: &str) -> Option<Option<CheckedType>> {
        if self.resolves(object) {
            return Some(Some(crate::mutation::field_type(object, field)));
        }
        self.objects.get(object).map(|fields| fields.get(field).cloned())
    }

    /// Whether a reference to the type name `name` fails the program (`reference to
    /// undefined type`): the object types declared here (Kubernetes' `DeclType`s resolve as
    /// type names in the checker, not in the runtime's type provider) and some protobuf
    /// well-known types.
    pub(super) fn undefined_at_runtime(&self, name: &str) -> bool {
        let name = name.strip_prefix('.').unwrap_or(name);
        !self.variables.contains_key(name)
            && (self.objects.contains_key(name) || decls::undefined_at_runtime(name) || self.resolves(name))
    }

    pub(super) fn global(&self, name: &str) -> Option<CheckedType> {
        let name = name.strip_prefix('.').unwrap_or(name);
        if let Some(t) = self.variables.get(name) {
            return Some(t.clone());
        }
        if let Some(t) = decls::type_identifier(name) {
            return Some(t);
        }
        if self.objects.contains_key(name) || self.resolves(name) {
            return Some(CheckedType::type_of(CheckedType::Struct(name.to_owned())));
        }
        None
    }
}
