//! The names of the keys and channels one cluster uses in Redis, all under
//! its prefix.
//!
//! | name | kind | holds |
//! |---|---|---|
//! | `{prefix}:node-seq` | counter | the last node id handed out (`INCR`) |
//! | `{prefix}:node:{n}` | string, expires | node `n` is alive; its owner's token |
//! | `{prefix}:nodes` | set | node ids that registered (pruned of dead ones) |
//! | `{prefix}:members:{n}:{group}` | hash, expires | node `n`'s members of `group`: connection id → user id (`""` for none), and `v` → the version |
//! | `{prefix}:users:{n}` | hash, expires | node `n`'s signed-in users: user id → connections |
//! | `{prefix}:name:{name}` | string | the name's holder and claim: `{connection id}\|{node}\|{node's token}\|{claim generation}` |
//! | `{prefix}:group:{group}` | channel | broadcasts to `group` |
//! | `{prefix}:everyone` | channel | broadcasts to every connection |
//! | `{prefix}:to-node:{n}` | channel | sends and kicks for node `n`'s connections |

/// The key and channel names of one cluster.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    pub(crate) fn node_seq(&self) -> String {
        format!("{}:node-seq", self.prefix)
    }

    pub(crate) fn node(&self, node: u16) -> String {
        format!("{}:node:{node}", self.prefix)
    }

    pub(crate) fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
    }

    pub(crate) fn members(&self, node: u16, group: &str) -> String {
        format!("{}:members:{node}:{group}", self.prefix)
    }

    pub(crate) fn users(&self, node: u16) -> String {
        format!("{}:users:{node}", self.prefix)
    }

    pub(crate) fn name(&self, name: &str) -> String {
        format!("{}:name:{name}", self.prefix)
    }

    /// What a node's liveness key starts with (the node id follows).
    pub(crate) fn node_prefix(&self) -> String {
        format!("{}:node:", self.prefix)
    }

    /// A `SCAN` pattern for every membership key of `node`.
    pub(crate) fn members_pattern(&self, node: u16) -> String {
        format!("{}:members:{node}:*", glob_escape(&self.prefix))
    }

    pub(crate) fn group_channel(&self, group: &str) -> String {
        format!("{}:group:{group}", self.prefix)
    }

    pub(crate) fn everyone_channel(&self) -> String {
        format!("{}:everyone", self.prefix)
    }

    pub(crate) fn node_channel(&self, node: u16) -> String {
        format!("{}:to-node:{node}", self.prefix)
    }
}

/// `text` with Redis glob's special characters escaped.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if matches!(character, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_under_the_prefix() {
        let keys = Keys::new("app");
        assert_eq!(keys.node(7), "app:node:7");
        assert_eq!(keys.members(7, "lobby:1"), "app:members:7:lobby:1");
        assert_eq!(keys.group_channel("lobby"), "app:group:lobby");
        assert_eq!(keys.node_channel(3), "app:to-node:3");
        assert_eq!(Keys::new("a*b").members_pattern(2), "a\\*b:members:2:*");
    }
}
