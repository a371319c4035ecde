//! The built-in resources served at more than one group/version, with their kinds: data only,
//! read by `equivalence.rs` (which says how the order is chosen).

use super::{at, shared, Shared, Sub};

const NONE: &[(&str, Sub)] = &[];
const STATUS: &[(&str, Sub)] = &[("status", Sub::Same)];
/// `scale` of `apps/v1` (and core `v1`) resources.
const SCALE_V1: (&str, Sub) = ("scale", Sub::Kind("autoscaling", "v1", "Scale"));
const SCALE_APPS_V1BETA2: (&str, Sub) = ("scale", Sub::Kind("apps", "v1beta2", "Scale"));
const SCALE_APPS_V1BETA1: (&str, Sub) = ("scale", Sub::Kind("apps", "v1beta1", "Scale"));
const SCALE_EXTENSIONS: (&str, Sub) = ("scale", Sub::Kind("extensions", "v1beta1", "Scale"));

/// The built-in resources served at more than one group/version, with their kinds.
/// Sources (kubernetes/kubernetes): `pkg/registry/<group>/rest/storage_<group>.go` for which
/// versions serve which resources and subresources, `pkg/controlplane/instance.go` and
/// `pkg/apis/<group>/install/install.go` for the order, `pkg/apis/events/install`,
/// `pkg/registry/core/event` for events stored with core `v1` events. Admission configuration
/// objects are left out: they are never sent to webhooks (§3.2).
pub(crate) const BUILT_IN: &[Shared] = &[
    // Core v1 events share storage with events.k8s.io events.
    shared(
        "events",
        &[
            at("", "v1", "Event", NONE),
            at("events.k8s.io", "v1", "Event", NONE),
            at("events.k8s.io", "v1beta1", "Event", NONE),
        ],
    ),
    // autoscaling
    shared(
        "horizontalpodautoscalers",
        &[
            at("autoscaling", "v2", "HorizontalPodAutoscaler", STATUS),
            at("autoscaling", "v1", "HorizontalPodAutoscaler", STATUS),
            at("autoscaling", "v2beta1", "HorizontalPodAutoscaler", STATUS),
            at("autoscaling", "v2beta2", "HorizontalPodAutoscaler", STATUS),
        ],
    ),
    // batch
    shared("cronjobs", &[at("batch", "v1", "CronJob", STATUS), at("batch", "v1beta1", "CronJob", STATUS)]),
    // certificates.k8s.io
    shared(
        "certificatesigningrequests",
        &[
            at(
                "certificates.k8s.io",
                "v1",
                "CertificateSigningRequest",
                &[("status", Sub::Same), ("approval", Sub::Same)],
            ),
            at(
                "certificates.k8s.io",
                "v1beta1",
                "CertificateSigningRequest",
                &[("status", Sub::Same), ("approval", Sub::Same)],
            ),
        ],
    ),
    // coordination.k8s.io
    shared(
        "leases",
        &[
            at("coordination.k8s.io", "v1", "Lease", NONE),
            at("coordination.k8s.io", "v1beta1", "Lease", NONE),
        ],
    ),
    // discovery.k8s.io
    shared(
        "endpointslices",
        &[
            at("discovery.k8s.io", "v1", "EndpointSlice", NONE),
            at("discovery.k8s.io", "v1beta1", "EndpointSlice", NONE),
        ],
    ),
    // extensions/v1beta1 (before networking.k8s.io and policy), networking.k8s.io
    shared(
        "networkpolicies",
        &[
            at("extensions", "v1beta1", "NetworkPolicy", NONE),
            at("networking.k8s.io", "v1", "NetworkPolicy", NONE),
        ],
    ),
    shared(
        "ingresses",
        &[
            at("extensions", "v1beta1", "Ingress", STATUS),
            at("networking.k8s.io", "v1", "Ingress", STATUS),
            at("networking.k8s.io", "v1beta1", "Ingress", STATUS),
        ],
    ),
    shared(
        "ingressclasses",
        &[
            at("networking.k8s.io", "v1", "IngressClass", NONE),
            at("networking.k8s.io", "v1beta1", "IngressClass", NONE),
        ],
    ),
    shared(
        "ipaddresses",
        &[
            at("networking.k8s.io", "v1", "IPAddress", NONE),
            at("networking.k8s.io", "v1beta1", "IPAddress", NONE),
        ],
    ),
    shared(
        "servicecidrs",
        &[
            at("networking.k8s.io", "v1", "ServiceCIDR", STATUS),
            at("networking.k8s.io", "v1beta1", "ServiceCIDR", STATUS),
        ],
    ),
    // node.k8s.io
    shared(
        "runtimeclasses",
        &[
            at("node.k8s.io", "v1", "RuntimeClass", NONE),
            at("node.k8s.io", "v1beta1", "RuntimeClass", NONE),
            at("node.k8s.io", "v1alpha1", "RuntimeClass", NONE),
        ],
    ),
    // policy
    shared(
        "poddisruptionbudgets",
        &[
            at("policy", "v1", "PodDisruptionBudget", STATUS),
            at("policy", "v1beta1", "PodDisruptionBudget", STATUS),
        ],
    ),
    shared(
        "podsecuritypolicies",
        &[
            at("extensions", "v1beta1", "PodSecurityPolicy", NONE),
            at("policy", "v1beta1", "PodSecurityPolicy", NONE),
        ],
    ),
    // rbac.authorization.k8s.io
    shared(
        "clusterrolebindings",
        &[
            at("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", NONE),
            at("rbac.authorization.k8s.io", "v1beta1", "ClusterRoleBinding", NONE),
            at("rbac.authorization.k8s.io", "v1alpha1", "ClusterRoleBinding", NONE),
        ],
    ),
    shared(
        "clusterroles",
        &[
            at("rbac.authorization.k8s.io", "v1", "ClusterRole", NONE),
            at("rbac.authorization.k8s.io", "v1beta1", "ClusterRole", NONE),
            at("rbac.authorization.k8s.io", "v1alpha1", "ClusterRole", NONE),
        ],
    ),
    shared(
        "rolebindings",
        &[
            at("rbac.authorization.k8s.io", "v1", "RoleBinding", NONE),
            at("rbac.authorization.k8s.io", "v1beta1", "RoleBinding", NONE),
            at("rbac.authorization.k8s.io", "v1alpha1", "RoleBinding", NONE),
        ],
    ),
    shared(
        "roles",
        &[
            at("rbac.authorization.k8s.io", "v1", "Role", NONE),
            at("rbac.authorization.k8s.io", "v1beta1", "Role", NONE),
            at("rbac.authorization.k8s.io", "v1alpha1", "Role", NONE),
        ],
    ),
    // scheduling.k8s.io
    shared(
        "priorityclasses",
        &[
            at("scheduling.k8s.io", "v1", "PriorityClass", NONE),
            at("scheduling.k8s.io", "v1beta1", "PriorityClass", NONE),
            at("scheduling.k8s.io", "v1alpha1", "PriorityClass", NONE),
        ],
    ),
    // storage.k8s.io
    shared(
        "storageclasses",
        &[
            at("storage.k8s.io", "v1", "StorageClass", NONE),
            at("storage.k8s.io", "v1beta1", "StorageClass", NONE),
        ],
    ),
    shared(
        "volumeattachments",
        &[
            at("storage.k8s.io", "v1", "VolumeAttachment", STATUS),
            at("storage.k8s.io", "v1beta1", "VolumeAttachment", STATUS),
            at("storage.k8s.io", "v1alpha1", "VolumeAttachment", STATUS),
        ],
    ),
    shared(
        "csidrivers",
        &[at("storage.k8s.io", "v1", "CSIDriver", NONE), at("storage.k8s.io", "v1beta1", "CSIDriver", NONE)],
    ),
    shared(
        "csinodes",
        &[at("storage.k8s.io", "v1", "CSINode", NONE), at("storage.k8s.io", "v1beta1", "CSINode", NONE)],
    ),
    shared(
        "csistoragecapacities",
        &[
            at("storage.k8s.io", "v1", "CSIStorageCapacity", NONE),
            at("storage.k8s.io", "v1beta1", "CSIStorageCapacity", NONE),
            at("storage.k8s.io", "v1alpha1", "CSIStorageCapacity", NONE),
        ],
    ),
    shared(
        "volumeattributesclasses",
        &[
            at("storage.k8s.io", "v1", "VolumeAttributesClass", NONE),
            at("storage.k8s.io", "v1beta1", "VolumeAttributesClass", NONE),
            at("storage.k8s.io", "v1alpha1", "VolumeAttributesClass", NONE),
        ],
    ),
    // flowcontrol.apiserver.k8s.io
    shared(
        "flowschemas",
        &[
            at("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1beta3", "FlowSchema", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1beta2", "FlowSchema", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1beta1", "FlowSchema", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1alpha1", "FlowSchema", STATUS),
        ],
    ),
    shared(
        "prioritylevelconfigurations",
        &[
            at("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1beta3", "PriorityLevelConfiguration", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1beta2", "PriorityLevelConfiguration", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1beta1", "PriorityLevelConfiguration", STATUS),
            at("flowcontrol.apiserver.k8s.io", "v1alpha1", "PriorityLevelConfiguration", STATUS),
        ],
    ),
    // extensions/v1beta1 (before apps), apps
    shared(
        "deployments",
        &[
            at(
                "extensions",
                "v1beta1",
                "Deployment",
                &[
                    ("status", Sub::Same),
                    SCALE_EXTENSIONS,
                    ("rollback", Sub::Kind("extensions", "v1beta1", "DeploymentRollback")),
                ],
            ),
            at("apps", "v1", "Deployment", &[("status", Sub::Same), SCALE_V1]),
            at("apps", "v1beta2", "Deployment", &[("status", Sub::Same), SCALE_APPS_V1BETA2]),
            at(
                "apps",
                "v1beta1",
                "Deployment",
                &[
                    ("status", Sub::Same),
                    SCALE_APPS_V1BETA1,
                    ("rollback", Sub::Kind("apps", "v1beta1", "DeploymentRollback")),
                ],
            ),
        ],
    ),
    shared(
        "daemonsets",
        &[
            at("extensions", "v1beta1", "DaemonSet", STATUS),
            at("apps", "v1", "DaemonSet", STATUS),
            at("apps", "v1beta2", "DaemonSet", STATUS),
        ],
    ),
    shared(
        "replicasets",
        &[
            at("extensions", "v1beta1", "ReplicaSet", &[("status", Sub::Same), SCALE_EXTENSIONS]),
            at("apps", "v1", "ReplicaSet", &[("status", Sub::Same), SCALE_V1]),
            at("apps", "v1beta2", "ReplicaSet", &[("status", Sub::Same), SCALE_APPS_V1BETA2]),
        ],
    ),
    shared(
        "statefulsets",
        &[
            at("apps", "v1", "StatefulSet", &[("status", Sub::Same), SCALE_V1]),
            at("apps", "v1beta2", "StatefulSet", &[("status", Sub::Same), SCALE_APPS_V1BETA2]),
            at("apps", "v1beta1", "StatefulSet", &[("status", Sub::Same), SCALE_APPS_V1BETA1]),
        ],
    ),
    shared(
        "controllerrevisions",
        &[
            at("apps", "v1", "ControllerRevision", NONE),
            at("apps", "v1beta2", "ControllerRevision", NONE),
            at("apps", "v1beta1", "ControllerRevision", NONE),
        ],
    ),
    // apiextensions-apiserver and kube-aggregator, which run in the same process.
    shared(
        "customresourcedefinitions",
        &[
            at("apiextensions.k8s.io", "v1", "CustomResourceDefinition", STATUS),
            at("apiextensions.k8s.io", "v1beta1", "CustomResourceDefinition", STATUS),
        ],
    ),
    shared(
        "apiservices",
        &[
            at("apiregistration.k8s.io", "v1", "APIService", STATUS),
            at("apiregistration.k8s.io", "v1beta1", "APIService", STATUS),
        ],
    ),
];
