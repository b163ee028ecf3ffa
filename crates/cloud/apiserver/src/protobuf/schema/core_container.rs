//! Descriptors for core/v1 `Container`, `EphemeralContainer` and `ContainerStatus` with everything they hold.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::core_volume::{LOCAL_OBJECT_REFERENCE, OBJECT_FIELD_SELECTOR, RESOURCE_FIELD_SELECTOR};
use super::{BOOL, I32, I64, INT_OR_STRING, Message, QUANTITY, STR, TIME, inline, map, msg, opt, ptr, rep, req};

/// core/v1 `ContainerStatus`.
pub(crate) static CONTAINER_STATUS: Message = Message::new(
    "ContainerStatus",
    &[
        req(1, "name", STR),
        opt(2, "state", msg(&CONTAINER_STATE)),
        opt(3, "lastState", msg(&CONTAINER_STATE)),
        req(4, "ready", BOOL),
        req(5, "restartCount", I32),
        req(6, "image", STR),
        req(7, "imageID", STR),
        opt(8, "containerID", STR),
        ptr(9, "started", BOOL),
        map(10, "allocatedResources", QUANTITY),
        opt(11, "resources", msg(&RESOURCE_REQUIREMENTS)),
        rep(12, "volumeMounts", msg(&VOLUME_MOUNT_STATUS)),
        opt(13, "user", msg(&CONTAINER_USER)),
        rep(14, "allocatedResourcesStatus", msg(&RESOURCE_STATUS)),
        ptr(15, "stopSignal", STR),
    ],
);

/// core/v1 `ResourceStatus`.
pub(crate) static RESOURCE_STATUS: Message = Message::new(
    "ResourceStatus",
    &[
        req(1, "name", STR),
        rep(2, "resources", msg(&RESOURCE_HEALTH)),
    ],
);

/// core/v1 `ResourceHealth`.
pub(crate) static RESOURCE_HEALTH: Message = Message::new(
    "ResourceHealth",
    &[
        req(1, "resourceID", STR),
        opt(2, "health", STR),
        ptr(6, "message", STR),
    ],
);

/// core/v1 `ContainerUser`.
pub(crate) static CONTAINER_USER: Message = Message::new(
    "ContainerUser",
    &[
        opt(1, "linux", msg(&LINUX_CONTAINER_USER)),
    ],
);

/// core/v1 `LinuxContainerUser`.
pub(crate) static LINUX_CONTAINER_USER: Message = Message::new(
    "LinuxContainerUser",
    &[
        req(1, "uid", I64),
        req(2, "gid", I64),
        rep(3, "supplementalGroups", I64),
    ],
);

/// core/v1 `VolumeMountStatus`.
pub(crate) static VOLUME_MOUNT_STATUS: Message = Message::new(
    "VolumeMountStatus",
    &[
        req(1, "name", STR),
        req(2, "mountPath", STR),
        opt(3, "readOnly", BOOL),
        ptr(4, "recursiveReadOnly", STR),
        opt(5, "volumeStatus", msg(&VOLUME_STATUS)),
    ],
);

/// core/v1 `VolumeStatus`.
pub(crate) static VOLUME_STATUS: Message = Message::new(
    "VolumeStatus",
    &[
        opt(1, "image", msg(&IMAGE_VOLUME_STATUS)),
    ],
);

/// core/v1 `ImageVolumeStatus`.
pub(crate) static IMAGE_VOLUME_STATUS: Message = Message::new(
    "ImageVolumeStatus",
    &[
        opt(1, "imageRef", STR),
    ],
);

/// core/v1 `ContainerState`.
pub(crate) static CONTAINER_STATE: Message = Message::new(
    "ContainerState",
    &[
        opt(1, "waiting", msg(&CONTAINER_STATE_WAITING)),
        opt(2, "running", msg(&CONTAINER_STATE_RUNNING)),
        opt(3, "terminated", msg(&CONTAINER_STATE_TERMINATED)),
    ],
);

/// core/v1 `ContainerStateTerminated`.
pub(crate) static CONTAINER_STATE_TERMINATED: Message = Message::new(
    "ContainerStateTerminated",
    &[
        req(1, "exitCode", I32),
        opt(2, "signal", I32),
        opt(3, "reason", STR),
        opt(4, "message", STR),
        opt(5, "startedAt", TIME),
        opt(6, "finishedAt", TIME),
        opt(7, "containerID", STR),
    ],
);

/// core/v1 `ContainerStateRunning`.
pub(crate) static CONTAINER_STATE_RUNNING: Message = Message::new(
    "ContainerStateRunning",
    &[
        opt(1, "startedAt", TIME),
    ],
);

/// core/v1 `ContainerStateWaiting`.
pub(crate) static CONTAINER_STATE_WAITING: Message = Message::new(
    "ContainerStateWaiting",
    &[
        opt(1, "reason", STR),
        opt(2, "message", STR),
    ],
);

/// core/v1 `EphemeralContainer`.
pub(crate) static EPHEMERAL_CONTAINER: Message = Message::new(
    "EphemeralContainer",
    &[
        inline(1, "ephemeralContainerCommon", &EPHEMERAL_CONTAINER_COMMON),
        opt(2, "targetContainerName", STR),
    ],
);

/// core/v1 `EphemeralContainerCommon`.
pub(crate) static EPHEMERAL_CONTAINER_COMMON: Message = Message::new(
    "EphemeralContainerCommon",
    &[
        req(1, "name", STR),
        opt(2, "image", STR),
        rep(3, "command", STR),
        rep(4, "args", STR),
        opt(5, "workingDir", STR),
        rep(6, "ports", msg(&CONTAINER_PORT)),
        rep(19, "envFrom", msg(&ENV_FROM_SOURCE)),
        rep(7, "env", msg(&ENV_VAR)),
        opt(8, "resources", msg(&RESOURCE_REQUIREMENTS)),
        rep(23, "resizePolicy", msg(&CONTAINER_RESIZE_POLICY)),
        ptr(24, "restartPolicy", STR),
        rep(25, "restartPolicyRules", msg(&CONTAINER_RESTART_RULE)),
        rep(9, "volumeMounts", msg(&VOLUME_MOUNT)),
        rep(21, "volumeDevices", msg(&VOLUME_DEVICE)),
        opt(10, "livenessProbe", msg(&PROBE)),
        opt(11, "readinessProbe", msg(&PROBE)),
        opt(22, "startupProbe", msg(&PROBE)),
        opt(12, "lifecycle", msg(&LIFECYCLE)),
        opt(13, "terminationMessagePath", STR),
        opt(20, "terminationMessagePolicy", STR),
        opt(14, "imagePullPolicy", STR),
        opt(15, "securityContext", msg(&SECURITY_CONTEXT)),
        opt(16, "stdin", BOOL),
        opt(17, "stdinOnce", BOOL),
        opt(18, "tty", BOOL),
    ],
);

/// core/v1 `Container`.
pub(crate) static CONTAINER: Message = Message::new(
    "Container",
    &[
        req(1, "name", STR),
        opt(2, "image", STR),
        rep(3, "command", STR),
        rep(4, "args", STR),
        opt(5, "workingDir", STR),
        rep(6, "ports", msg(&CONTAINER_PORT)),
        rep(19, "envFrom", msg(&ENV_FROM_SOURCE)),
        rep(7, "env", msg(&ENV_VAR)),
        opt(8, "resources", msg(&RESOURCE_REQUIREMENTS)),
        rep(23, "resizePolicy", msg(&CONTAINER_RESIZE_POLICY)),
        ptr(24, "restartPolicy", STR),
        rep(25, "restartPolicyRules", msg(&CONTAINER_RESTART_RULE)),
        rep(9, "volumeMounts", msg(&VOLUME_MOUNT)),
        rep(21, "volumeDevices", msg(&VOLUME_DEVICE)),
        opt(10, "livenessProbe", msg(&PROBE)),
        opt(11, "readinessProbe", msg(&PROBE)),
        opt(22, "startupProbe", msg(&PROBE)),
        opt(12, "lifecycle", msg(&LIFECYCLE)),
        opt(13, "terminationMessagePath", STR),
        opt(20, "terminationMessagePolicy", STR),
        opt(14, "imagePullPolicy", STR),
        opt(15, "securityContext", msg(&SECURITY_CONTEXT)),
        opt(16, "stdin", BOOL),
        opt(17, "stdinOnce", BOOL),
        opt(18, "tty", BOOL),
    ],
);

/// core/v1 `SecurityContext`.
pub(crate) static SECURITY_CONTEXT: Message = Message::new(
    "SecurityContext",
    &[
        opt(1, "capabilities", msg(&CAPABILITIES)),
        ptr(2, "privileged", BOOL),
        opt(3, "seLinuxOptions", msg(&SE_LINUX_OPTIONS)),
        opt(10, "windowsOptions", msg(&WINDOWS_SECURITY_CONTEXT_OPTIONS)),
        ptr(4, "runAsUser", I64),
        ptr(8, "runAsGroup", I64),
        ptr(5, "runAsNonRoot", BOOL),
        ptr(6, "readOnlyRootFilesystem", BOOL),
        ptr(7, "allowPrivilegeEscalation", BOOL),
        ptr(9, "procMount", STR),
        opt(11, "seccompProfile", msg(&SECCOMP_PROFILE)),
        opt(12, "appArmorProfile", msg(&APP_ARMOR_PROFILE)),
    ],
);

/// core/v1 `AppArmorProfile`.
pub(crate) static APP_ARMOR_PROFILE: Message = Message::new(
    "AppArmorProfile",
    &[
        req(1, "type", STR),
        ptr(2, "localhostProfile", STR),
    ],
);

/// core/v1 `SeccompProfile`.
pub(crate) static SECCOMP_PROFILE: Message = Message::new(
    "SeccompProfile",
    &[
        req(1, "type", STR),
        ptr(2, "localhostProfile", STR),
    ],
);

/// core/v1 `WindowsSecurityContextOptions`.
pub(crate) static WINDOWS_SECURITY_CONTEXT_OPTIONS: Message = Message::new(
    "WindowsSecurityContextOptions",
    &[
        ptr(1, "gmsaCredentialSpecName", STR),
        ptr(2, "gmsaCredentialSpec", STR),
        ptr(3, "runAsUserName", STR),
        ptr(4, "hostProcess", BOOL),
    ],
);

/// core/v1 `SELinuxOptions`.
pub(crate) static SE_LINUX_OPTIONS: Message = Message::new(
    "SELinuxOptions",
    &[
        opt(1, "user", STR),
        opt(2, "role", STR),
        opt(3, "type", STR),
        opt(4, "level", STR),
    ],
);

/// core/v1 `Capabilities`.
pub(crate) static CAPABILITIES: Message = Message::new(
    "Capabilities",
    &[
        rep(1, "add", STR),
        rep(2, "drop", STR),
    ],
);

/// core/v1 `Lifecycle`.
pub(crate) static LIFECYCLE: Message = Message::new(
    "Lifecycle",
    &[
        opt(1, "postStart", msg(&LIFECYCLE_HANDLER)),
        opt(2, "preStop", msg(&LIFECYCLE_HANDLER)),
        ptr(3, "stopSignal", STR),
    ],
);

/// core/v1 `LifecycleHandler`.
pub(crate) static LIFECYCLE_HANDLER: Message = Message::new(
    "LifecycleHandler",
    &[
        opt(1, "exec", msg(&EXEC_ACTION)),
        opt(2, "httpGet", msg(&HTTP_GET_ACTION)),
        opt(3, "tcpSocket", msg(&TCP_SOCKET_ACTION)),
        opt(4, "sleep", msg(&SLEEP_ACTION)),
    ],
);

/// core/v1 `SleepAction`.
pub(crate) static SLEEP_ACTION: Message = Message::new(
    "SleepAction",
    &[
        req(1, "seconds", I64),
    ],
);

/// core/v1 `Probe`.
pub(crate) static PROBE: Message = Message::new(
    "Probe",
    &[
        inline(1, "handler", &PROBE_HANDLER),
        opt(2, "initialDelaySeconds", I32),
        opt(3, "timeoutSeconds", I32),
        opt(4, "periodSeconds", I32),
        opt(5, "successThreshold", I32),
        opt(6, "failureThreshold", I32),
        ptr(7, "terminationGracePeriodSeconds", I64),
    ],
);

/// core/v1 `ProbeHandler`.
pub(crate) static PROBE_HANDLER: Message = Message::new(
    "ProbeHandler",
    &[
        opt(1, "exec", msg(&EXEC_ACTION)),
        opt(2, "httpGet", msg(&HTTP_GET_ACTION)),
        opt(3, "tcpSocket", msg(&TCP_SOCKET_ACTION)),
        opt(4, "grpc", msg(&GRPC_ACTION)),
    ],
);

/// core/v1 `GRPCAction`.
pub(crate) static GRPC_ACTION: Message = Message::new(
    "GRPCAction",
    &[
        req(1, "port", I32),
        ptr(2, "service", STR),
        ptr(3, "mode", STR),
    ],
);

/// core/v1 `TCPSocketAction`.
pub(crate) static TCP_SOCKET_ACTION: Message = Message::new(
    "TCPSocketAction",
    &[
        opt(1, "port", INT_OR_STRING),
        opt(2, "host", STR),
    ],
);

/// core/v1 `HTTPGetAction`.
pub(crate) static HTTP_GET_ACTION: Message = Message::new(
    "HTTPGetAction",
    &[
        opt(1, "path", STR),
        opt(2, "port", INT_OR_STRING),
        opt(3, "host", STR),
        opt(4, "scheme", STR),
        rep(5, "httpHeaders", msg(&HTTP_HEADER)),
        ptr(6, "protocol", STR),
    ],
);

/// core/v1 `HTTPHeader`.
pub(crate) static HTTP_HEADER: Message = Message::new(
    "HTTPHeader",
    &[
        req(1, "name", STR),
        req(2, "value", STR),
    ],
);

/// core/v1 `ExecAction`.
pub(crate) static EXEC_ACTION: Message = Message::new(
    "ExecAction",
    &[
        rep(1, "command", STR),
    ],
);

/// core/v1 `VolumeDevice`.
pub(crate) static VOLUME_DEVICE: Message = Message::new(
    "VolumeDevice",
    &[
        req(1, "name", STR),
        req(2, "devicePath", STR),
    ],
);

/// core/v1 `VolumeMount`.
pub(crate) static VOLUME_MOUNT: Message = Message::new(
    "VolumeMount",
    &[
        req(1, "name", STR),
        opt(2, "readOnly", BOOL),
        ptr(7, "recursiveReadOnly", STR),
        req(3, "mountPath", STR),
        opt(4, "subPath", STR),
        ptr(5, "mountPropagation", STR),
        opt(6, "subPathExpr", STR),
        rep(8, "bindMountOptions", STR),
    ],
);

/// core/v1 `ContainerRestartRule`.
pub(crate) static CONTAINER_RESTART_RULE: Message = Message::new(
    "ContainerRestartRule",
    &[
        opt(1, "action", STR),
        opt(2, "exitCodes", msg(&CONTAINER_RESTART_RULE_ON_EXIT_CODES)),
    ],
);

/// core/v1 `ContainerRestartRuleOnExitCodes`.
pub(crate) static CONTAINER_RESTART_RULE_ON_EXIT_CODES: Message = Message::new(
    "ContainerRestartRuleOnExitCodes",
    &[
        opt(1, "operator", STR),
        rep(2, "values", I32),
    ],
);

/// core/v1 `ContainerResizePolicy`.
pub(crate) static CONTAINER_RESIZE_POLICY: Message = Message::new(
    "ContainerResizePolicy",
    &[
        req(1, "resourceName", STR),
        req(2, "restartPolicy", STR),
    ],
);

/// core/v1 `ResourceRequirements`.
pub(crate) static RESOURCE_REQUIREMENTS: Message = Message::new(
    "ResourceRequirements",
    &[
        map(1, "limits", QUANTITY),
        map(2, "requests", QUANTITY),
        rep(3, "claims", msg(&RESOURCE_CLAIM)),
    ],
);

/// core/v1 `ResourceClaim`.
pub(crate) static RESOURCE_CLAIM: Message = Message::new(
    "ResourceClaim",
    &[
        req(1, "name", STR),
        opt(2, "request", STR),
    ],
);

/// core/v1 `EnvVar`.
pub(crate) static ENV_VAR: Message = Message::new(
    "EnvVar",
    &[
        req(1, "name", STR),
        opt(2, "value", STR),
        opt(3, "valueFrom", msg(&ENV_VAR_SOURCE)),
    ],
);

/// core/v1 `EnvVarSource`.
pub(crate) static ENV_VAR_SOURCE: Message = Message::new(
    "EnvVarSource",
    &[
        opt(1, "fieldRef", msg(&OBJECT_FIELD_SELECTOR)),
        opt(2, "resourceFieldRef", msg(&RESOURCE_FIELD_SELECTOR)),
        opt(3, "configMapKeyRef", msg(&CONFIG_MAP_KEY_SELECTOR)),
        opt(4, "secretKeyRef", msg(&SECRET_KEY_SELECTOR)),
        opt(5, "fileKeyRef", msg(&FILE_KEY_SELECTOR)),
    ],
);

/// core/v1 `FileKeySelector`.
pub(crate) static FILE_KEY_SELECTOR: Message = Message::new(
    "FileKeySelector",
    &[
        req(1, "volumeName", STR),
        req(2, "path", STR),
        req(3, "key", STR),
        ptr(4, "optional", BOOL),
    ],
);

/// core/v1 `SecretKeySelector`.
pub(crate) static SECRET_KEY_SELECTOR: Message = Message::new(
    "SecretKeySelector",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        req(2, "key", STR),
        ptr(3, "optional", BOOL),
    ],
);

/// core/v1 `ConfigMapKeySelector`.
pub(crate) static CONFIG_MAP_KEY_SELECTOR: Message = Message::new(
    "ConfigMapKeySelector",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        req(2, "key", STR),
        ptr(3, "optional", BOOL),
    ],
);

/// core/v1 `EnvFromSource`.
pub(crate) static ENV_FROM_SOURCE: Message = Message::new(
    "EnvFromSource",
    &[
        opt(1, "prefix", STR),
        opt(2, "configMapRef", msg(&CONFIG_MAP_ENV_SOURCE)),
        opt(3, "secretRef", msg(&SECRET_ENV_SOURCE)),
    ],
);

/// core/v1 `SecretEnvSource`.
pub(crate) static SECRET_ENV_SOURCE: Message = Message::new(
    "SecretEnvSource",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        ptr(2, "optional", BOOL),
    ],
);

/// core/v1 `ConfigMapEnvSource`.
pub(crate) static CONFIG_MAP_ENV_SOURCE: Message = Message::new(
    "ConfigMapEnvSource",
    &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        ptr(2, "optional", BOOL),
    ],
);

/// core/v1 `ContainerPort`.
pub(crate) static CONTAINER_PORT: Message = Message::new(
    "ContainerPort",
    &[
        opt(1, "name", STR),
        opt(2, "hostPort", I32),
        req(3, "containerPort", I32),
        opt(4, "protocol", STR),
        opt(5, "hostIP", STR),
    ],
);
