//! KubeEdge's DeviceTwin tables in the edge's database
//! (`edge/pkg/devicetwin/dtclient`, docs/protocol.md §7): `device`,
//! `device_attr` and `device_twin`, so that tools reading a KubeEdge
//! edge's database read this one.
//!
//! DeviceTwin writes a device's rows whole (its attribute and twin rows
//! replaced) in one transaction per flush of changed devices; a row that
//! does not read (a bad JSON column) loses that field with a warning, not
//! the device.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension as _, params};

use crate::twins::DeviceState;
use crate::types::{MsgAttr, MsgTwin, TwinValue, TwinVersion, TypeMetadata, ValueMetadata};

/// A database failure.
#[derive(Debug, thiserror::Error)]
#[error("device tables in {path}: {source}")]
pub struct DbError {
    path: PathBuf,
    #[source]
    source: rusqlite::Error,
}

/// The device tables.
#[derive(Debug)]
pub struct TwinDb {
    path: PathBuf,
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS device (
        id          varchar(64) NOT NULL PRIMARY KEY,
        name        varchar(64) NOT NULL DEFAULT '',
        description varchar(256) NOT NULL DEFAULT '',
        state       varchar(64) NOT NULL DEFAULT '',
        last_online varchar(64) NOT NULL DEFAULT ''
    );
    CREATE TABLE IF NOT EXISTS device_attr (
        id          integer NOT NULL PRIMARY KEY AUTOINCREMENT,
        deviceid    varchar(64) NOT NULL DEFAULT '',
        name        varchar(64) NOT NULL DEFAULT '',
        description varchar(256) NOT NULL DEFAULT '',
        value       varchar(256) NOT NULL DEFAULT '',
        optional    bool NOT NULL DEFAULT FALSE,
        attr_type   varchar(64) NOT NULL DEFAULT '',
        metadata    varchar(256) NOT NULL DEFAULT ''
    );
    CREATE TABLE IF NOT EXISTS device_twin (
        id               integer NOT NULL PRIMARY KEY AUTOINCREMENT,
        deviceid         varchar(64) NOT NULL DEFAULT '',
        name             varchar(64) NOT NULL DEFAULT '',
        description      varchar(256) NOT NULL DEFAULT '',
        expected         varchar(256) NOT NULL DEFAULT '',
        actual           varchar(256) NOT NULL DEFAULT '',
        expected_meta    varchar(256) NOT NULL DEFAULT '',
        actual_meta      varchar(256) NOT NULL DEFAULT '',
        expected_version varchar(256) NOT NULL DEFAULT '',
        actual_version   varchar(256) NOT NULL DEFAULT '',
        optional         bool NOT NULL DEFAULT FALSE,
        attr_type        varchar(64) NOT NULL DEFAULT '',
        metadata         varchar(256) NOT NULL DEFAULT ''
    );
    CREATE INDEX IF NOT EXISTS device_attr_deviceid ON device_attr(deviceid);
    CREATE INDEX IF NOT EXISTS device_twin_deviceid ON device_twin(deviceid);";

/// A change to write.
#[derive(Debug, Clone)]
pub enum Write {
    /// The device and all its rows, as they are now.
    Put(DeviceState),
    /// The device and its rows are gone.
    Remove(String),
}

fn json_or_empty<T: serde::Serialize>(v: &Option<T>) -> String {
    v.as_ref().and_then(|v| serde_json::to_string(v).ok()).unwrap_or_default()
}

fn parse_col<T: serde::de::DeserializeOwned>(device: &str, what: &str, text: &str) -> Option<T> {
    if text.is_empty() {
        return None;
    }
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(module = "twin", device, column = what, error = %e, "device table column does not read; ignored");
            None
        }
    }
}

impl TwinDb {
    /// Opens the tables in the database at `path` (the edge's database),
    /// creating them if missing.
    pub fn open(path: &Path) -> Result<TwinDb, DbError> {
        let err = |source| DbError { path: path.to_owned(), source };
        edgehive_files::make_private_database(path, "the edge store")
            .map_err(|e| err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        // NORMAL in WAL mode: a crash loses at most the last flush of
        // reported values, which mappers report again; nothing the cloud
        // sent lives only here (MetaManager keeps the Devices).
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;").map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(TwinDb { path: path.to_owned(), conn: Mutex::new(conn) })
    }

    fn err(&self, source: rusqlite::Error) -> DbError {
        DbError { path: self.path.clone(), source }
    }

    /// Writes `writes` in one transaction.
    pub fn apply(&self, writes: &[Write]) -> Result<(), DbError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // IMMEDIATE: the write lock is taken at BEGIN, where the busy
        // timeout applies. A deferred transaction that reads first would
        // fail at once with SQLITE_BUSY when the other module's connection
        // (MetaManager and DeviceTwin share the file) wrote meanwhile.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(|e| self.err(e))?;
        {
            // Prepared once per connection, not once per row.
            let prepare = |sql: &str| tx.prepare_cached(sql).map_err(|e| self.err(e));
            let mut del_attrs = prepare("DELETE FROM device_attr WHERE deviceid = ?1")?;
            let mut del_twins = prepare("DELETE FROM device_twin WHERE deviceid = ?1")?;
            let mut del_device = prepare("DELETE FROM device WHERE id = ?1")?;
            let mut put_device = prepare(
                "INSERT OR REPLACE INTO device (id, name, description, state, last_online) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut put_attr = prepare(
                "INSERT INTO device_attr (deviceid, name, value, optional, attr_type, metadata)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut put_twin = prepare(
                "INSERT INTO device_twin (deviceid, name, expected, actual, expected_meta, actual_meta,
                    expected_version, actual_version, optional, attr_type, metadata)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for w in writes {
                let id = match w {
                    Write::Put(d) => &d.id,
                    Write::Remove(id) => id,
                };
                del_attrs.execute([id]).map_err(|e| self.err(e))?;
                del_twins.execute([id]).map_err(|e| self.err(e))?;
                let Write::Put(d) = w else {
                    del_device.execute([id]).map_err(|e| self.err(e))?;
                    continue;
                };
                put_device
                    .execute(params![d.id, d.name, d.description, d.state, d.last_online])
                    .map_err(|e| self.err(e))?;
                for (name, a) in &d.attributes {
                    put_attr
                        .execute(params![
                            d.id,
                            name,
                            a.value,
                            a.optional.unwrap_or(false),
                            a.metadata.as_ref().map(|m| m.ty.as_str()).unwrap_or_default(),
                            json_or_empty(&a.metadata)
                        ])
                        .map_err(|e| self.err(e))?;
                }
                for (name, t) in &d.twins {
                    let value = |v: &Option<TwinValue>| v.as_ref().and_then(|v| v.value.clone()).unwrap_or_default();
                    let meta = |v: &Option<TwinValue>| json_or_empty(&v.as_ref().and_then(|v| v.metadata.clone()));
                    put_twin
                        .execute(params![
                            d.id,
                            name,
                            value(&t.expected),
                            value(&t.actual),
                            meta(&t.expected),
                            meta(&t.actual),
                            json_or_empty(&t.expected_version),
                            json_or_empty(&t.actual_version),
                            t.optional.unwrap_or(false),
                            t.metadata.as_ref().map(|m| m.ty.as_str()).unwrap_or_default(),
                            json_or_empty(&t.metadata),
                        ])
                        .map_err(|e| self.err(e))?;
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Every device with its attributes and twins.
    pub fn load(&self) -> Result<BTreeMap<String, DeviceState>, DbError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = BTreeMap::new();
        let mut q =
            conn.prepare("SELECT id, name, description, state, last_online FROM device").map_err(|e| self.err(e))?;
        let rows = q
            .query_map([], |r| {
                Ok(DeviceState {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    description: r.get(2)?,
                    state: r.get(3)?,
                    last_online: r.get(4)?,
                    ..DeviceState::default()
                })
            })
            .map_err(|e| self.err(e))?;
        for d in rows {
            let d = d.map_err(|e| self.err(e))?;
            out.insert(d.id.clone(), d);
        }
        let mut q = conn
            .prepare("SELECT deviceid, name, value, optional, attr_type FROM device_attr")
            .map_err(|e| self.err(e))?;
        let rows = q
            .query_map([], |r| {
                let id: String = r.get(0)?;
                let name: String = r.get(1)?;
                let ty: String = r.get(4)?;
                let attr = MsgAttr {
                    value: r.get(2)?,
                    optional: Some(r.get::<_, bool>(3)?),
                    metadata: (!ty.is_empty()).then_some(TypeMetadata { ty }),
                };
                Ok((id, name, attr))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (id, name, attr) = row.map_err(|e| self.err(e))?;
            if let Some(d) = out.get_mut(&id) {
                d.attributes.insert(name, attr);
            }
        }
        let mut q = conn
            .prepare(
                "SELECT deviceid, name, expected, actual, expected_meta, actual_meta, expected_version,
                        actual_version, optional, attr_type FROM device_twin",
            )
            .map_err(|e| self.err(e))?;
        let rows = q
            .query_map([], |r| {
                let cols: Vec<String> = (0..8).map(|i| r.get::<_, String>(i)).collect::<Result<_, _>>()?;
                let optional: bool = r.get(8)?;
                let ty: String = r.get(9)?;
                Ok((cols, optional, ty))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (c, optional, ty) = row.map_err(|e| self.err(e))?;
            let id = &c[0];
            let side = |value: &str, meta: &str| -> Option<TwinValue> {
                if value.is_empty() && meta.is_empty() {
                    return None;
                }
                Some(TwinValue {
                    value: (!value.is_empty()).then(|| value.to_owned()),
                    metadata: parse_col::<ValueMetadata>(id, "meta", meta),
                })
            };
            let twin = MsgTwin {
                expected: side(&c[2], &c[4]),
                actual: side(&c[3], &c[5]),
                optional: Some(optional),
                metadata: (!ty.is_empty()).then_some(TypeMetadata { ty }),
                expected_version: parse_col::<TwinVersion>(id, "expected_version", &c[6]),
                actual_version: parse_col::<TwinVersion>(id, "actual_version", &c[7]),
            };
            if let Some(d) = out.get_mut(id) {
                d.twins.insert(c[1].clone(), twin);
            }
        }
        Ok(out)
    }

    /// One device's state column (for tests and tools).
    pub fn state_of(&self, id: &str) -> Result<Option<String>, DbError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.query_row("SELECT state FROM device WHERE id = ?1", [id], |r| r.get(0)).optional().map_err(|e| self.err(e))
    }
}
