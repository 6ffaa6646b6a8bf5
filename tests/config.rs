//! Settings files (feature `serde`): docs/CONFIGURATION.md has a row for
//! every key of the server's, the client's and the Redis backplane's
//! settings, with the default the code has; examples/chat_server.toml is
//! read by examples/chat_server, whose flags win over it.
//!
//! The keys come from the types' own `Deserialize` (the field list serde
//! derives), so a field added without a row in the table fails here.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use ternio::ServerConfig;
use ternio::protocol::secure::RekeyPolicy;
use ternio_client::{ClientConfig, Keepalive, ReconnectPolicy, SecureConfig};
use ternio_examples::chat_settings::ChatServerSettings;
use ternio_redis::RedisSettings;

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fields of `T`, as its derived `Deserialize` names them.
fn fields_of<T: DeserializeOwned>() -> Vec<&'static str> {
    match T::deserialize(FieldNames) {
        Err(FieldsFound(fields)) if !fields.is_empty() => fields,
        _ => panic!("{} is not a struct", std::any::type_name::<T>()),
    }
}

/// A deserializer that only asks for a struct's field names.
struct FieldNames;

/// The field names a struct asked for (empty: it was not a struct).
#[derive(Debug)]
struct FieldsFound(Vec<&'static str>);

impl fmt::Display for FieldsFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fields {:?}", self.0)
    }
}

impl std::error::Error for FieldsFound {}

impl de::Error for FieldsFound {
    fn custom<T: fmt::Display>(_: T) -> Self {
        FieldsFound(Vec::new())
    }
}

impl<'de> Deserializer<'de> for FieldNames {
    type Error = FieldsFound;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, FieldsFound> {
        Err(FieldsFound(Vec::new()))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, FieldsFound> {
        Err(FieldsFound(fields.to_vec()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// `fields` with the keys of the tables in `nested` spelled out as
/// `table.key`; with `optional`, the table's own key stays too (it can be
/// `"off"`).
fn keys(fields: Vec<&'static str>, nested: &[(&str, Vec<&'static str>, bool)]) -> Vec<String> {
    let mut keys = Vec::new();
    for field in fields {
        match nested.iter().find(|(table, _, _)| *table == field) {
            Some((table, inner, optional)) => {
                if *optional {
                    keys.push(table.to_string());
                }
                keys.extend(inner.iter().map(|key| format!("{table}.{key}")));
            }
            None => keys.push(field.to_owned()),
        }
    }
    keys
}

/// `value`'s keys with their TOML values, tables spelled out as `table.key`.
fn flatten(prefix: &str, value: toml::Table, into: &mut BTreeMap<String, String>) {
    for (key, value) in value {
        let key = format!("{prefix}{key}");
        match value {
            toml::Value::Table(table) => flatten(&format!("{key}."), table, into),
            value => {
                into.insert(key, value.to_string());
            }
        }
    }
}

/// The defaults of `value` (and of `more`, for tables whose default is
/// `"off"`), as TOML values by key.
fn defaults<T: serde::Serialize>(
    value: &T,
    more: &[(&str, toml::Table)],
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    flatten("", toml::Table::try_from(value).unwrap(), &mut map);
    for (table, inner) in more {
        flatten(&format!("{table}."), inner.clone(), &mut map);
    }
    map
}

/// The rows of the table under the `## {section}` heading of
/// docs/CONFIGURATION.md: key and default column.
fn documented(section: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("docs/CONFIGURATION.md")).unwrap();
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            inside = heading.starts_with(section);
            continue;
        }
        if !inside {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 || !cells[1].starts_with('`') {
            continue;
        }
        rows.push((cells[1].trim_matches('`').to_owned(), cells[3].to_owned()));
    }
    assert!(
        !rows.is_empty(),
        "docs/CONFIGURATION.md has no table under ## {section}"
    );
    rows
}

/// Every key has a row, every row a key, and the default column starts with
/// the default's TOML value (in backticks) where the key has one.
fn assert_table_matches(section: &str, keys: Vec<String>, defaults: BTreeMap<String, String>) {
    let rows = documented(section);
    let mut problems = Vec::new();
    for key in &keys {
        let Some((_, default)) = rows.iter().find(|(row, _)| row == key) else {
            let value = defaults
                .get(key)
                .map_or("none".to_owned(), |v| format!("`{v}`"));
            problems.push(format!("no row for `{key}` (default {value})"));
            continue;
        };
        if let Some(value) = defaults.get(key)
            && !default.starts_with(&format!("`{value}`"))
        {
            problems.push(format!(
                "`{key}`: the default is `{value}`, the table says {default}"
            ));
        }
    }
    for (row, _) in &rows {
        if !keys.contains(row) {
            problems.push(format!("row `{row}` names no setting"));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/CONFIGURATION.md, ## {section}:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_server_table_has_every_setting_and_its_default() {
    let keys = keys(
        fields_of::<ServerConfig>(),
        &[("rekey", fields_of::<RekeyPolicy>(), false)],
    );
    assert!(keys.contains(&"rekey.interval".to_owned()), "{keys:?}");
    assert_table_matches("Server", keys, defaults(&ServerConfig::default(), &[]));
}

#[test]
fn every_server_setting_has_a_builder_setter() {
    // Settings set together by one setter, and the setter that sets them.
    const SET_TOGETHER: [(&str, &str); 5] = [
        ("accepts_per_ip", "accept_rate_per_ip"),
        ("accept_window", "accept_rate_per_ip"),
        ("resume_ttl", "resumable"),
        ("resume_replay_bytes", "resumable"),
        ("rekey", "rekey"),
    ];
    let builder = std::fs::read_to_string(root().join("framework/src/builder.rs")).unwrap();
    let missing: Vec<&str> = fields_of::<ServerConfig>()
        .into_iter()
        .filter(|field| {
            let setter = SET_TOGETHER
                .iter()
                .find(|(key, _)| key == field)
                .map_or(*field, |(_, setter)| setter);
            !builder.contains(&format!("pub fn {setter}("))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/CONFIGURATION.md says every server setting has a ServerBuilder setter; these have none: {missing:?}"
    );
}

#[test]
fn the_client_table_has_every_setting_and_its_default() {
    let keys = keys(
        fields_of::<ClientConfig>(),
        &[
            ("reconnect", fields_of::<ReconnectPolicy>(), true),
            ("secure", fields_of::<SecureConfig>(), true),
            ("keepalive", fields_of::<Keepalive>(), true),
            ("rekey", fields_of::<RekeyPolicy>(), false),
        ],
    );
    // The tables that are "off" by default: their keys' defaults are those
    // of the table when it is given.
    let on = [(
        "reconnect",
        toml::Table::try_from(ReconnectPolicy::default()).unwrap(),
    )];
    assert_table_matches("Client", keys, defaults(&ClientConfig::default(), &on));
}

#[test]
fn the_redis_table_has_every_setting_and_its_default() {
    let keys = keys(fields_of::<RedisSettings>(), &[]);
    assert!(!keys.iter().any(|key| key.contains("secret")), "{keys:?}");
    assert_table_matches("Redis", keys, defaults(&RedisSettings::default(), &[]));
}

#[test]
fn the_example_file_parses_and_sets_what_it_says() {
    let path = root().join("examples/chat_server.toml");
    let settings = ChatServerSettings::load(&path).unwrap();
    assert_eq!(settings.server.max_connections, 20_000);
    assert_eq!(settings.server.max_connections_per_ip, 512);
    assert_eq!(
        settings.server.idle_timeout,
        Some(std::time::Duration::from_secs(120))
    );
    assert_eq!(settings.listen.tcp, "127.0.0.1:7101".parse().unwrap());
    // Not in the file: the default.
    assert_eq!(
        settings.server.frame_timeout,
        ServerConfig::default().frame_timeout
    );
    assert!(
        settings.redis.is_none(),
        "the [redis] table is commented out"
    );
    // Its commented-out [redis] table is valid too.
    let text = std::fs::read_to_string(&path).unwrap();
    let uncommented: String = text
        .lines()
        .map(|line| {
            line.strip_prefix("# ")
                .filter(|rest| rest.starts_with('[') || rest.contains(" = "))
                .unwrap_or(line)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let with_redis = ChatServerSettings::parse(&uncommented).unwrap();
    assert_eq!(with_redis.redis.unwrap().prefix, "chat");
}

#[test]
fn an_unknown_key_is_an_error_that_names_it_and_its_line() {
    let error = ChatServerSettings::parse("[server]\nmax_connections = 5\nidle_timout = \"1m\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `idle_timout`"), "{error}");
    assert!(error.contains("line 3"), "{error}");
    let error = ChatServerSettings::parse("[redis]\nsecret = \"hunter2hunter2hunter2\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `secret`"), "{error}");
    let error = ChatServerSettings::parse("[listen]\ntcp = \"localhost\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("tcp"), "{error}");
}

/// examples/chat_server: the binary `TERNIO_CHAT_SERVER` names, or the one
/// `cargo test --workspace` built beside the test binaries.
fn chat_server() -> Command {
    Command::new(ternio_tests::example_binary(
        "chat_server",
        "TERNIO_CHAT_SERVER",
    ))
}

#[test]
fn the_chat_server_reads_the_file_and_its_flags_win() {
    let file = root().join("examples/chat_server.toml");
    let output = chat_server()
        .arg("--config")
        .arg(&file)
        .args(["--tcp", "127.0.0.1:7999", "--print-config"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let printed = ChatServerSettings::parse(std::str::from_utf8(&output.stdout).unwrap()).unwrap();
    assert_eq!(
        printed.listen.tcp,
        "127.0.0.1:7999".parse().unwrap(),
        "the flag wins"
    );
    assert_eq!(
        printed.listen.ws,
        "127.0.0.1:7102".parse().unwrap(),
        "from the file"
    );
    assert_eq!(printed.server.max_connections, 20_000, "from the file");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[server]\nmax_conections = 5\n").unwrap();
    let output = chat_server().arg("--config").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown field `max_conections`"),
        "{stderr}"
    );
    assert!(stderr.contains("bad.toml"), "{stderr}");
}

/// The password of a Redis URL given on the command line is a secret:
/// `--print-config` (whose output ends up in tickets and logs) hides it.
#[test]
fn print_config_hides_the_redis_password() {
    let output = chat_server()
        .args([
            "--redis",
            "redis://ops:hunter2@10.0.0.5:6379/0",
            "--print-config",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let printed = String::from_utf8(output.stdout).unwrap();
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(!printed.contains("ops"), "{printed}");
    let settings = ChatServerSettings::parse(&printed).unwrap();
    assert_eq!(
        settings.redis.unwrap().url,
        "redis://<redacted>@10.0.0.5:6379/0"
    );
}
