//! Descriptors for core/v1 `Volume`, every volume source a pod can name, and `PersistentVolumeClaim`
//! (the claim templates of a `StatefulSet`).
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::core_pod::VOLUME_HEALTH_CONDITION;
use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::{BOOL, I32, I64, Message, QUANTITY, STR, TIME, inline, map, msg, opt, ptr, rep, req};

/// core/v1 `Volume`.
pub(crate) static VOLUME: Message = Message::new(
    "Volume",
    &[
        req(1, "name", STR),
        inline(2, "volumeSource", &VOLUME_SOURCE),
    ],
);

/// core/v1 `VolumeSource`.
pub(crate) static VOLUME_SOURCE: Message = Message::new(
    "VolumeSource",
    &[
        opt(1, "hostPath", msg(&HOST_PATH_VOLUME_SOURCE)),
        opt(2, "emptyDir", msg(&EMPTY_DIR_VOLUME_SOURCE)),
        opt(3, "gcePersistentDisk", msg(&GCE_PERSISTENT_DISK_VOLUME_SOURCE)),
        opt(4, "awsElasticBlockStore", msg(&AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE)),
        opt(5, "gitRepo", msg(&GIT_REPO_VOLUME_SOURCE)),
        opt(6, "secret", msg(&SECRET_VOLUME_SOURCE)),
        opt(7, "nfs", msg(&NFS_VOLUME_SOURCE)),
        opt(8, "iscsi", msg(&ISCSI_VOLUME_SOURCE)),
        opt(9, "glusterfs", msg(&GLUSTERFS_VOLUME_SOURCE)),
        opt(10, "persistentVolumeClaim", msg(&PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE)),
        opt(11, "rbd", msg(&RBD_VOLUME_SOURCE)),
        opt(12, "flexVolume", msg(&FLEX_VOLUME_SOURCE)),
        opt(13, "cinder", msg(&CINDER_VOLUME_SOURCE)),
        opt(14, "cephfs", msg(&CEPH_FS_VOLUME_SOURCE)),
        opt(15, "flocker", msg(&FLOCKER_VOLUME_SOURCE)),
        opt(16, "downwardAPI", msg(&DOWNWARD_API_VOLUME_SOURCE)),
        opt(17, "fc", msg(&FC_VOLUME_SOURCE)),
        opt(18, "azureFile", msg(&AZURE_FILE_VOLUME_SOURCE)),
        opt(19, "configMap", msg(&CONFIG_MAP_VOLUME_SOURCE)),
        opt(20, "vsphereVolume", msg(&VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE)),
        opt(21, "quobyte", msg(&QUOBYTE_VOLUME_SOURCE)),
        opt(22, "azureDisk", msg(&AZURE_DISK_VOLUME_SOURCE)),
        opt(23, "photonPersistentDisk", msg(&PHOTON_PERSISTENT_DISK_VOLUME_SOURCE)),
        opt(26, "projected", msg(&PROJECTED_VOLUME_SOURCE)),
        opt(24, "portworxVolume", msg(&PORTWORX_VOLUME_SOURCE)),
        opt(25, "scaleIO", msg(&SCALE_IO_VOLUME_SOURCE)),
        opt(27, "storageos", msg(&STORAGE_OS_VOLUME_SOURCE)),
        opt(28, "csi", msg(&CSI_VOLUME_SOURCE)),
        opt(29, "ephemeral", msg(&EPHEMERAL_VOLUME_SOURCE)),
        opt(30, "image", msg(&IMAGE_VOLUME_SOURCE)),
    ],
);

/// core/v1 `ImageVolumeSource`.
pub(crate) static IMAGE_VOLUME_SOURCE: Message = Message::new(
    "ImageVolumeSource",
    &[
        opt(1, "reference", STR),
        opt(2, "pullPolicy", STR),
    ],
);

/// core/v1 `EphemeralVolumeSource`.
pub(crate) static EPHEMERAL_VOLUME_SOURCE: Message = Message::new(
    "EphemeralVolumeSource",
    &[
        opt(1, "volumeClaimTemplate", msg(&PERSISTENT_VOLUME_CLAIM_TEMPLATE)),
    ],
);

/// core/v1 `PersistentVolumeClaimTemplate`.
pub(crate) static PERSISTENT_VOLUME_CLAIM_TEMPLATE: Message = Message::new(
    "PersistentVolumeClaimTemplate",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&PERSISTENT_VOLUME_CLAIM_SPEC)),
    ],
);

/// core/v1 `PersistentVolumeClaim`.
pub(crate) static PERSISTENT_VOLUME_CLAIM: Message = Message::new(
    "PersistentVolumeClaim",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&PERSISTENT_VOLUME_CLAIM_SPEC)),
        opt(3, "status", msg(&PERSISTENT_VOLUME_CLAIM_STATUS)),
    ],
);

/// core/v1 `PersistentVolumeClaimStatus`.
pub(crate) static PERSISTENT_VOLUME_CLAIM_STATUS: Message = Message::new(
    "PersistentVolumeClaimStatus",
    &[
        opt(1, "phase", STR),
        rep(2, "accessModes", STR),
        map(3, "capacity", QUANTITY),
        rep(4, "conditions", msg(&PERSISTENT_VOLUME_CLAIM_CONDITION)),
        map(5, "allocatedResources", QUANTITY),
        map(7, "allocatedResourceStatuses", STR),
        ptr(8, "currentVolumeAttributesClassName", STR),
        opt(9, "modifyVolumeStatus", msg(&MODIFY_VOLUME_STATUS)),
        opt(10, "healthStatus", msg(&VOLUME_HEALTH_STATUS)),
    ],
);

/// core/v1 `VolumeHealthStatus`.
pub(crate) static VOLUME_HEALTH_STATUS: Message = Message::new(
    "VolumeHealthStatus",
    &[
        rep(1, "healthConditions", msg(&VOLUME_HEALTH_CONDITION)),
        opt(2, "lastTransitionTime", TIME),
    ],
);

/// core/v1 `ModifyVolumeStatus`.
pub(crate) static MODIFY_VOLUME_STATUS: Message = Message::new(
    "ModifyVolumeStatus",
    &[
        opt(1, "targetVolumeAttributesClassName", STR),
        req(2, "status", STR),
    ],
);

/// core/v1 `PersistentVolumeClaimCondition`.
pub(crate) static PERSISTENT_VOLUME_CLAIM_CONDITION: Message = Message::new(
    "PersistentVolumeClaimCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "lastProbeTime", TIME),
        opt(4, "lastTransitionTime", TIME),
        opt(5, "reason", STR),
        opt(6, "message", STR),
    ],
);

/// core/v1 `PersistentVolumeClaimSpec`.
pub(crate) static PERSISTENT_VOLUME_CLAIM_SPEC: Message = Message::new(
    "PersistentVolumeClaimSpec",
    &[
        rep(1, "accessModes", STR),
        opt(4, "selector", msg(&LABEL_SELECTOR)),
        opt(2, "resources", msg(&VOLUME_RESOURCE_REQUIREMENTS)),
        opt(3, "volumeName", STR),
        ptr(5, "storageClassName", STR),
        ptr(6, "volumeMode", STR),
        opt(7, "dataSource", msg(&TYPED_LOCAL_OBJECT_REFERENCE)),
        opt(8, "dataSourceRef", msg(&TYPED_OBJECT_REFERENCE)),
        ptr(9, "volumeAttributesClassName", STR),
    ],
);

/// core/v1 `TypedObjectReference`.
pub(crate) static TYPED_OBJECT_REFERENCE: Message = Message::new(
    "TypedObjectReference",
    &[
        ptr(1, "apiGroup", STR),
        req(2, "kind", STR),
        req(3, "name", STR),
        ptr(4, "namespace", STR),
    ],
);

/// core/v1 `TypedLocalObjectReference`.
pub(crate) static TYPED_LOCAL_OBJECT_REFERENCE: Message = Message::new(
    "TypedLocalObjectReference",
    &[
        ptr(1, "apiGroup", STR),
        req(2, "kind", STR),
        req(3, "name", STR),
    ],
);

/// core/v1 `VolumeResourceRequirements`.
pub(crate) static VOLUME_RESOURCE_REQUIREMENTS: Message = Message::new(
    "VolumeResourceRequirements",
    &[
        map(1, "limits", QUANTITY),
        map(2, "requests", QUANTITY),
    ],
);

/// core/v1 `CSIVolumeSource`.
pub(crate) static CSI_VOLUME_SOURCE: Message = Message::new(
    "CSIVolumeSource",
    &[
        req(1, "driver", STR),
        ptr(2, "readOnly", BOOL),
        ptr(3, "fsType", STR),
        map(4, "volumeAttributes", STR),
        opt(5, "nodePublishSecretRef", msg(&LOCAL_OBJECT_REFERENCE)),
    ],
);

/// core/v1 `StorageOSVolumeSource`.
pub(crate) static STORAGE_OS_VOLUME_SOURCE: Message = Message::new(
    "StorageOSVolumeSource",
    &[
        opt(1, "volumeName", STR),
        opt(2, "volumeNamespace", STR),
        opt(3, "fsType", STR),
        opt(4, "readOnly", BOOL),
        opt(5, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
    ],
);

/// core/v1 `ScaleIOVolumeSource`.
pub(crate) static SCALE_IO_VOLUME_SOURCE: Message = Message::new(
    "ScaleIOVolumeSource",
    &[
        req(1, "gateway", STR),
        req(2, "system", STR),
        opt(3, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
        opt(4, "sslEnabled", BOOL),
        opt(5, "protectionDomain", STR),
        opt(6, "storagePool", STR),
        opt(7, "storageMode", STR),
        opt(8, "volumeName", STR),
        opt(9, "fsType", STR),
        opt(10, "readOnly", BOOL),
    ],
);

/// core/v1 `PortworxVolumeSource`.
pub(crate) static PORTWORX_VOLUME_SOURCE: Message = Message::new(
    "PortworxVolumeSource",
    &[
        req(1, "volumeID", STR),
        opt(2, "fsType", STR),
        opt(3, "readOnly", BOOL),
    ],
);

/// core/v1 `ProjectedVolumeSource`.
pub(crate) static PROJECTED_VOLUME_SOURCE: Message = Message::new(
    "ProjectedVolumeSource",
    &[
        rep(1, "sources", msg(&VOLUME_PROJECTION)),
        ptr(2, "defaultMode", I32),
        ptr(3, "defaultUser", I64),
    ],
);

/// core/v1 `VolumeProjection`.
pub(crate) static VOLUME_PROJECTION: Message = Message::new(
    "VolumeProjection",
    &[
        opt(1, "secret", msg(&SECRET_PROJECTION)),
        opt(2, "downwardAPI", msg(&DOWNWARD_API_PROJECTION)),
        opt(3, "configMap", msg(&CONFIG_MAP_PROJECTION)),
        opt(4, "serviceAccountToken", msg(&SERVICE_ACCOUNT_TOKEN_PROJECTION)),
        opt(5, "clusterTrustBundle", msg(&CLUSTER_TRUST_BUNDLE_PROJECTION)),
        opt(6, "podCertificate", msg(&POD_CERTIFICATE_PROJECTION)),
    ],
);

/// core/v1 `PodCertificateProjection`.
pub(crate) static POD_CERTIFICATE_PROJECTION: Message = Message::new(
    "PodCertificateProjection",
    &[
        opt(1, "signerName", STR),
        opt(2, "keyType", STR),
        ptr(3, "maxExpirationSeconds", I32),
        opt(4, "credentialBundlePath", STR),
        opt(5, "keyPath", STR),
        opt(6, "certificateChainPath", STR),
        map(7, "userAnnotations", STR),
        ptr(8, "user", I64),
    ],
);

/// core/v1 `ClusterTrustBundleProjection`.
pub(crate) static CLUSTER_TRUST_BUNDLE_PROJECTION: Message = Message::new(
    "ClusterTrustBundleProjection",
    &[
        ptr(1, "name", STR),
        ptr(2, "signerName", STR),
        opt(3, "labelSelector", msg(&LABEL_SELECTOR)),
        ptr(5, "optional", BOOL),
        req(4, "path", STR),
        ptr(6, "user", I64),
    ],
);

/// core/v1 `ServiceAccountTokenProjection`.
pub(crate) static SERVICE_ACCOUNT_TOKEN_PROJECTION: Message = Message::new(
    "ServiceAccountTokenProjection",
    &[
        opt(1, "audience", STR),
        ptr(2, "expirationSeconds", I64),
        req(3, "path", STR),
        ptr(4, "user", I64),
    ],
);

/// core/v1 `ConfigMapProjection`.
pub(crate) static CONFIG_MAP_PROJECTION: Message = Message::new(
    "ConfigMapProjection",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", msg(&KEY_TO_PATH)),
        ptr(4, "optional", BOOL),
    ],
);

/// core/v1 `DownwardAPIProjection`.
pub(crate) static DOWNWARD_API_PROJECTION: Message = Message::new(
    "DownwardAPIProjection",
    &[
        rep(1, "items", msg(&DOWNWARD_API_VOLUME_FILE)),
    ],
);

/// core/v1 `SecretProjection`.
pub(crate) static SECRET_PROJECTION: Message = Message::new(
    "SecretProjection",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", msg(&KEY_TO_PATH)),
        ptr(4, "optional", BOOL),
    ],
);

/// core/v1 `PhotonPersistentDiskVolumeSource`.
pub(crate) static PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: Message = Message::new(
    "PhotonPersistentDiskVolumeSource",
    &[
        req(1, "pdID", STR),
        opt(2, "fsType", STR),
    ],
);

/// core/v1 `AzureDiskVolumeSource`.
pub(crate) static AZURE_DISK_VOLUME_SOURCE: Message = Message::new(
    "AzureDiskVolumeSource",
    &[
        req(1, "diskName", STR),
        req(2, "diskURI", STR),
        ptr(3, "cachingMode", STR),
        ptr(4, "fsType", STR),
        ptr(5, "readOnly", BOOL),
        ptr(6, "kind", STR),
    ],
);

/// core/v1 `QuobyteVolumeSource`.
pub(crate) static QUOBYTE_VOLUME_SOURCE: Message = Message::new(
    "QuobyteVolumeSource",
    &[
        req(1, "registry", STR),
        req(2, "volume", STR),
        opt(3, "readOnly", BOOL),
        opt(4, "user", STR),
        opt(5, "group", STR),
        opt(6, "tenant", STR),
    ],
);

/// core/v1 `VsphereVirtualDiskVolumeSource`.
pub(crate) static VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: Message = Message::new(
    "VsphereVirtualDiskVolumeSource",
    &[
        req(1, "volumePath", STR),
        opt(2, "fsType", STR),
        opt(3, "storagePolicyName", STR),
        opt(4, "storagePolicyID", STR),
    ],
);

/// core/v1 `ConfigMapVolumeSource`.
pub(crate) static CONFIG_MAP_VOLUME_SOURCE: Message = Message::new(
    "ConfigMapVolumeSource",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", msg(&KEY_TO_PATH)),
        ptr(3, "defaultMode", I32),
        ptr(4, "optional", BOOL),
        ptr(5, "defaultUser", I64),
    ],
);

/// core/v1 `AzureFileVolumeSource`.
pub(crate) static AZURE_FILE_VOLUME_SOURCE: Message = Message::new(
    "AzureFileVolumeSource",
    &[
        req(1, "secretName", STR),
        req(2, "shareName", STR),
        opt(3, "readOnly", BOOL),
    ],
);

/// core/v1 `FCVolumeSource`.
pub(crate) static FC_VOLUME_SOURCE: Message = Message::new(
    "FCVolumeSource",
    &[
        rep(1, "targetWWNs", STR),
        ptr(2, "lun", I32),
        opt(3, "fsType", STR),
        opt(4, "readOnly", BOOL),
        rep(5, "wwids", STR),
    ],
);

/// core/v1 `DownwardAPIVolumeSource`.
pub(crate) static DOWNWARD_API_VOLUME_SOURCE: Message = Message::new(
    "DownwardAPIVolumeSource",
    &[
        rep(1, "items", msg(&DOWNWARD_API_VOLUME_FILE)),
        ptr(2, "defaultMode", I32),
        ptr(3, "defaultUser", I64),
    ],
);

/// core/v1 `DownwardAPIVolumeFile`.
pub(crate) static DOWNWARD_API_VOLUME_FILE: Message = Message::new(
    "DownwardAPIVolumeFile",
    &[
        req(1, "path", STR),
        opt(2, "fieldRef", msg(&OBJECT_FIELD_SELECTOR)),
        opt(3, "resourceFieldRef", msg(&RESOURCE_FIELD_SELECTOR)),
        ptr(4, "mode", I32),
        ptr(5, "user", I64),
    ],
);

/// core/v1 `ResourceFieldSelector`.
pub(crate) static RESOURCE_FIELD_SELECTOR: Message = Message::new(
    "ResourceFieldSelector",
    &[
        opt(1, "containerName", STR),
        req(2, "resource", STR),
        opt(3, "divisor", QUANTITY),
    ],
);

/// core/v1 `ObjectFieldSelector`.
pub(crate) static OBJECT_FIELD_SELECTOR: Message = Message::new(
    "ObjectFieldSelector",
    &[
        opt(1, "apiVersion", STR),
        req(2, "fieldPath", STR),
    ],
);

/// core/v1 `FlockerVolumeSource`.
pub(crate) static FLOCKER_VOLUME_SOURCE: Message = Message::new(
    "FlockerVolumeSource",
    &[
        opt(1, "datasetName", STR),
        opt(2, "datasetUUID", STR),
    ],
);

/// core/v1 `CephFSVolumeSource`.
pub(crate) static CEPH_FS_VOLUME_SOURCE: Message = Message::new(
    "CephFSVolumeSource",
    &[
        rep(1, "monitors", STR),
        opt(2, "path", STR),
        opt(3, "user", STR),
        opt(4, "secretFile", STR),
        opt(5, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
        opt(6, "readOnly", BOOL),
    ],
);

/// core/v1 `CinderVolumeSource`.
pub(crate) static CINDER_VOLUME_SOURCE: Message = Message::new(
    "CinderVolumeSource",
    &[
        req(1, "volumeID", STR),
        opt(2, "fsType", STR),
        opt(3, "readOnly", BOOL),
        opt(4, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
    ],
);

/// core/v1 `FlexVolumeSource`.
pub(crate) static FLEX_VOLUME_SOURCE: Message = Message::new(
    "FlexVolumeSource",
    &[
        req(1, "driver", STR),
        opt(2, "fsType", STR),
        opt(3, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
        opt(4, "readOnly", BOOL),
        map(5, "options", STR),
    ],
);

/// core/v1 `RBDVolumeSource`.
pub(crate) static RBD_VOLUME_SOURCE: Message = Message::new(
    "RBDVolumeSource",
    &[
        rep(1, "monitors", STR),
        req(2, "image", STR),
        opt(3, "fsType", STR),
        opt(4, "pool", STR),
        opt(5, "user", STR),
        opt(6, "keyring", STR),
        opt(7, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
        opt(8, "readOnly", BOOL),
    ],
);

/// core/v1 `PersistentVolumeClaimVolumeSource`.
pub(crate) static PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: Message = Message::new(
    "PersistentVolumeClaimVolumeSource",
    &[
        req(1, "claimName", STR),
        opt(2, "readOnly", BOOL),
    ],
);

/// core/v1 `GlusterfsVolumeSource`.
pub(crate) static GLUSTERFS_VOLUME_SOURCE: Message = Message::new(
    "GlusterfsVolumeSource",
    &[
        req(1, "endpoints", STR),
        req(2, "path", STR),
        opt(3, "readOnly", BOOL),
    ],
);

/// core/v1 `ISCSIVolumeSource`.
pub(crate) static ISCSI_VOLUME_SOURCE: Message = Message::new(
    "ISCSIVolumeSource",
    &[
        req(1, "targetPortal", STR),
        req(2, "iqn", STR),
        req(3, "lun", I32),
        opt(4, "iscsiInterface", STR),
        opt(5, "fsType", STR),
        opt(6, "readOnly", BOOL),
        rep(7, "portals", STR),
        opt(8, "chapAuthDiscovery", BOOL),
        opt(11, "chapAuthSession", BOOL),
        opt(10, "secretRef", msg(&LOCAL_OBJECT_REFERENCE)),
        ptr(12, "initiatorName", STR),
    ],
);

/// core/v1 `LocalObjectReference`.
pub(crate) static LOCAL_OBJECT_REFERENCE: Message = Message::new(
    "LocalObjectReference",
    &[
        opt(1, "name", STR),
    ],
);

/// core/v1 `NFSVolumeSource`.
pub(crate) static NFS_VOLUME_SOURCE: Message = Message::new(
    "NFSVolumeSource",
    &[
        req(1, "server", STR),
        req(2, "path", STR),
        opt(3, "readOnly", BOOL),
    ],
);

/// core/v1 `SecretVolumeSource`.
pub(crate) static SECRET_VOLUME_SOURCE: Message = Message::new(
    "SecretVolumeSource",
    &[
        opt(1, "secretName", STR),
        rep(2, "items", msg(&KEY_TO_PATH)),
        ptr(3, "defaultMode", I32),
        ptr(4, "optional", BOOL),
        ptr(5, "defaultUser", I64),
    ],
);

/// core/v1 `KeyToPath`.
pub(crate) static KEY_TO_PATH: Message = Message::new(
    "KeyToPath",
    &[
        req(1, "key", STR),
        req(2, "path", STR),
        ptr(3, "mode", I32),
        ptr(4, "user", I64),
    ],
);

/// core/v1 `GitRepoVolumeSource`.
pub(crate) static GIT_REPO_VOLUME_SOURCE: Message = Message::new(
    "GitRepoVolumeSource",
    &[
        req(1, "repository", STR),
        opt(2, "revision", STR),
        opt(3, "directory", STR),
    ],
);

/// core/v1 `AWSElasticBlockStoreVolumeSource`.
pub(crate) static AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: Message = Message::new(
    "AWSElasticBlockStoreVolumeSource",
    &[
        req(1, "volumeID", STR),
        opt(2, "fsType", STR),
        opt(3, "partition", I32),
        opt(4, "readOnly", BOOL),
    ],
);

/// core/v1 `GCEPersistentDiskVolumeSource`.
pub(crate) static GCE_PERSISTENT_DISK_VOLUME_SOURCE: Message = Message::new(
    "GCEPersistentDiskVolumeSource",
    &[
        req(1, "pdName", STR),
        opt(2, "fsType", STR),
        opt(3, "partition", I32),
        opt(4, "readOnly", BOOL),
    ],
);

/// core/v1 `EmptyDirVolumeSource`.
pub(crate) static EMPTY_DIR_VOLUME_SOURCE: Message = Message::new(
    "EmptyDirVolumeSource",
    &[
        opt(1, "medium", STR),
        opt(2, "sizeLimit", QUANTITY),
        ptr(3, "mode", I32),
    ],
);

/// core/v1 `HostPathVolumeSource`.
pub(crate) static HOST_PATH_VOLUME_SOURCE: Message = Message::new(
    "HostPathVolumeSource",
    &[
        req(1, "path", STR),
        ptr(2, "type", STR),
    ],
);
