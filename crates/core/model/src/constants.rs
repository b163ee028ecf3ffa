//! Well-known strings of KubeEdge's protocol (docs/protocol.md §1.2).
//!
//! They are plain `&'static str`, so `Text::from(op::INSERT)` costs nothing.

/// Route operations.
pub mod op {
    // beehive model
    pub const INSERT: &str = "insert";
    pub const DELETE: &str = "delete";
    pub const QUERY: &str = "query";
    pub const UPDATE: &str = "update";
    pub const PATCH: &str = "patch";
    pub const UPLOAD: &str = "upload";
    pub const RESPONSE: &str = "response";
    pub const ERROR: &str = "error";
    // edge common
    pub const CONNECT: &str = "connect";
    pub const SUBSCRIBE: &str = "subscribe";
    pub const UNSUBSCRIBE: &str = "unsubscribe";
    pub const MESSAGE: &str = "message";
    pub const PUBLISH: &str = "publish";
    pub const GET_RESULT: &str = "get_result";
    pub const KEEPALIVE: &str = "keepalive";
    // cloudhub model
    pub const GET: &str = "get";
    pub const LIST: &str = "list";
    pub const DETAIL: &str = "detail";
    pub const DELTA: &str = "delta";
    pub const DOCUMENT: &str = "document";
    pub const UPDATED: &str = "updated";
    pub const DELETED: &str = "deleted";
    pub const CONNECTED: &str = "connected";
    pub const DISCONNECTED: &str = "disconnected";
    // viaduct control
    pub const VIADUCT_HEADER: &str = "header";
    pub const VIADUCT_CONFIG: &str = "config";
    pub const VIADUCT_PING: &str = "ping";
    pub const VIADUCT_PONG: &str = "pong";
    // CSI
    pub const CREATE_VOLUME: &str = "createvolume";
    pub const DELETE_VOLUME: &str = "deletevolume";
    pub const CONTROLLER_PUBLISH_VOLUME: &str = "controllerpublishvolume";
    pub const CONTROLLER_UNPUBLISH_VOLUME: &str = "controllerunpublishvolume";
    // metaserver, node upgrade
    pub const APPLICATION_RESPONSE: &str = "applicationResponse";
    pub const UPGRADE: &str = "upgrade";
    pub const UNHOLD_UPGRADE: &str = "unhold-upgrade";
    /// edgehive, not KubeEdge: an edge's list of what its store holds, sent
    /// after connecting to a cloud that agreed the `inventory` feature.
    pub const INVENTORY: &str = "inventory";
}

/// Route groups: the ones on the wire and the edge-internal beehive groups.
pub mod group {
    // on the wire
    pub const RESOURCE: &str = "resource";
    pub const TWIN: &str = "twin";
    pub const FUNC: &str = "func";
    pub const USER: &str = "user";
    pub const META: &str = "meta";
    pub const NODE_UPGRADE_JOB_CONTROLLER: &str = "nodeupgradejobcontroller";
    // edge-internal beehive groups
    pub const BUS: &str = "bus";
    pub const HUB: &str = "hub";
    pub const EDGED: &str = "edged";
    pub const EDGESTREAM: &str = "edgestream";
}

/// Route sources (and beehive module names).
pub mod source {
    // edge
    pub const EDGED: &str = "edged";
    pub const EVENTBUS: &str = "eventbus";
    pub const SERVICEBUS: &str = "servicebus";
    pub const EDGESTREAM: &str = "edgestream";
    pub const TWIN: &str = "twin";
    pub const METAMANAGER: &str = "metamanager";
    /// The EdgeHub module's name; also the source of keepalives.
    pub const WEBSOCKET: &str = "websocket";
    pub const EDGEHUB: &str = "edgehub";
    pub const BUS: &str = "bus";
    // cloud
    pub const CLOUDHUB: &str = "cloudhub";
    pub const EDGECONTROLLER: &str = "edgecontroller";
    pub const DEVICECONTROLLER: &str = "devicecontroller";
    pub const SYNCCONTROLLER: &str = "synccontroller";
    pub const DYNAMICCONTROLLER: &str = "dynamiccontroller";
    pub const POLICYCONTROLLER: &str = "policycontroller";
    pub const NODEUPGRADEJOBCONTROLLER: &str = "nodeupgradejobcontroller";
    pub const ROUTER: &str = "router";
    pub const ROUTER_EVENTBUS: &str = "router_eventbus";
    pub const ROUTER_SERVICEBUS: &str = "router_servicebus";
    pub const CLOUDSTREAM: &str = "cloudStream";
    pub const METASERVER: &str = "metaserver";
    pub const TASKMANAGER: &str = "taskmanager";
}

/// Resource types, the third-from-last token of a resource path.
pub mod resource_type {
    pub const POD: &str = "pod";
    pub const CONFIGMAP: &str = "configmap";
    pub const SERVICEACCOUNTTOKEN: &str = "serviceaccounttoken";
    pub const SECRET: &str = "secret";
    pub const NODE: &str = "node";
    pub const PODLIST: &str = "podlist";
    pub const PODSTATUS: &str = "podstatus";
    pub const PODPATCH: &str = "podpatch";
    pub const NODESTATUS: &str = "nodestatus";
    pub const NODEPATCH: &str = "nodepatch";
    pub const RULE: &str = "rule";
    pub const RULEENDPOINT: &str = "ruleendpoint";
    pub const RULESTATUS: &str = "rulestatus";
    pub const LEASE: &str = "lease";
    pub const SERVICEACCOUNTACCESS: &str = "serviceaccountaccess";
    pub const SERVICE: &str = "service";
    pub const ENDPOINTS: &str = "endpoints";
    pub const PERSISTENTVOLUME: &str = "persistentvolume";
    pub const PERSISTENTVOLUMECLAIM: &str = "persistentvolumeclaim";
    pub const VOLUMEATTACHMENT: &str = "volumeattachment";
    pub const VOLUME: &str = "volume";
    pub const MEMBERSHIP: &str = "membership";
    pub const TWIN: &str = "twin";
    pub const AUTH_INFO: &str = "auth_info";
    pub const DEVICE: &str = "device";
    pub const DEVICE_MODEL: &str = "devicemodel";
    pub const EVENT: &str = "event";
    pub const CERTIFICATESIGNINGREQUEST: &str = "certificatesigningrequest";
    pub const K8S_CA: &str = "k8s/ca.crt";
    /// edgehive, not KubeEdge: the resource type of an edge's inventory
    /// (`null/inventory/{node}`).
    pub const INVENTORY: &str = "inventory";
}

/// Other fixed strings of the protocol.
pub mod well_known {
    /// Namespace token used for cluster-scoped objects in resource paths.
    pub const NULL_NAMESPACE: &str = "null";
    /// First token of a cloud-internal resource path.
    pub const NODE_PREFIX: &str = "node";
    /// Resource of connection events on the edge.
    pub const NODE_CONNECTION: &str = "node/connection";
    /// Content of the edge's connection events.
    pub const CLOUD_CONNECTED: &str = "cloud_connected";
    pub const CLOUD_DISCONNECTED: &str = "cloud_disconnected";
    /// Content of an ACK.
    pub const ACK_OK: &str = "OK";
    /// Content of a keepalive.
    pub const KEEPALIVE_PING: &str = "ping";
    /// Default KubeEdge project id.
    pub const DEFAULT_PROJECT_ID: &str = "e632aba927ea4ac2b575ec1603d56f10";
    /// The Kubernetes release edgehive implements: the API server's
    /// `/version` and edged's `nodeInfo.kubeletVersion` both report it, so
    /// that no kubelet is newer than its API server (Kubernetes' version-skew
    /// policy). Its API types are those of `k8s-openapi`'s `v1_33`.
    pub const KUBERNETES_VERSION: &str = "v1.33.0";
    /// edgehive, not KubeEdge: the beehive `type` of EdgeHub's
    /// `cloud_connected` event lists, comma-separated, what the link agreed
    /// ([`connection_has`]). This one: the cloud takes the link's WebSocket
    /// pings as the node's heartbeat (no Lease renewals needed).
    pub const SESSION_LIVENESS: &str = "session-liveness";
    /// How the cloud says it is too busy for an edge's message: an `error`
    /// answer naming the message as its parent, whose content ends so —
    /// from source `cloudhub` when CloudHub could not hand it to its
    /// controller in time, from `edgecontroller` when the node already had
    /// its share of requests waiting there. The edge sends the message
    /// again; a request's asker is told.
    pub const CLOUD_BUSY: &str = "is busy; try again";
    /// In the `cloud_connected` event's list: the cloud reconciles the
    /// edge store's inventory (MetaManager sends it).
    pub const INVENTORY_AGREED: &str = "inventory";
    /// In the `cloud_connected` event's list: the cloud takes many devices'
    /// twin and state reports in one `devices/reports` message.
    pub const DEVICE_REPORTS_AGREED: &str = "device-reports";

    /// Whether the beehive `type` of a `cloud_connected` event lists `what`.
    pub fn connection_has(message_type: &str, what: &str) -> bool {
        message_type.split(',').any(|t| t == what)
    }
    /// edgehive, cloud-internal: the beehive `type` of a downstream `delete`
    /// of an object that still exists but that the node no longer needs
    /// (its pods stopped using it, its pod moved to another node). CloudHub
    /// forgets the node's success point as soon as it queues such a delete,
    /// whether or not the edge ever acknowledges it, and clears the type
    /// before the message leaves.
    pub const UNNEEDED: &str = "unneeded";
    /// edgehive, cloud-internal: the beehive `type` of a downstream object
    /// the node must be sent again although its success point says it has it
    /// (its store's inventory says otherwise). CloudHub forgets the point
    /// first and clears the type before the message leaves.
    pub const RESEND: &str = "resend";
}
