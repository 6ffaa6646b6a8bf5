//! The cluster's presence as one node sees it: for each group with a
//! member on this node, the other nodes' members, each node's view at the
//! version that node last wrote (the [`Mirror`]), and the events that a
//! change of view makes.
//!
//! **How it stays right.** A node writes its members of a group to Redis
//! (a hash with the version, see `keys`) and publishes a presence notice on
//! the group's channel in one transaction. A node with members in the
//! group subscribes to that channel *before* it reads the views, so it
//! misses no notice; a notice above the version it holds marks the view
//! stale, and the link reads it again from Redis. A view only ever moves to
//! a higher version, so a read and a notice may arrive in either order.
//! After a link is lost, every view is read again (a changed one reports
//! its differences); a node whose liveness key expired is dropped with its
//! members ([`PresenceChange::Lost`]), once this node has been connected
//! for a whole node TTL (so that after a Redis restart the other nodes
//! have time to register again). A node id that another process holds
//! now (its liveness key carries another token than when its views were
//! read: a configured node id taken again as soon as the dead process's
//! key expired) is a dead node too: the old process's members are lost,
//! and the new one's views are read whatever their version.
//!
//! **Whether to publish.** A group whose views were read, all empty, with
//! no notice announcing a version not read yet, has no member on another
//! node: its broadcasts are not published ([`Mirror::alone`]). A node that
//! takes its first member of a group publishes a notice as it subscribes,
//! before it writes the view; until a view at least that new is read, the
//! node counts as having members.
//!
//! **The list and the events agree.** The first read of a group's views
//! reports nothing: for a group with members here, `Hub::cluster_presence`
//! answers from the mirror, once that read is done, so the list an
//! application reads and the events that follow it together say who is
//! there.

use std::collections::{BTreeMap, HashMap, HashSet};

use ternio::{ConnectionId, Member, PresenceChange, PresenceEvent, UserId};

/// The field of a membership hash that holds its version.
pub(crate) const VERSION_FIELD: &str = "v";

/// One node's members of one group, as read from Redis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// The version the node wrote; `None` when the key is gone (the node
    /// left the group a TTL ago, or Redis lost it).
    pub(crate) version: Option<u64>,
    pub(crate) members: BTreeMap<ConnectionId, Option<UserId>>,
}

impl View {
    /// The view in a membership hash of node `node` (`HGETALL`'s pairs).
    /// Fields that are not a connection id of that node are ignored, and
    /// so is a user id that is not valid.
    pub(crate) fn parse(node: u16, fields: Vec<(String, String)>) -> Self {
        let mut view = Self::default();
        for (field, value) in fields {
            if field == VERSION_FIELD {
                view.version = value.parse().ok();
                continue;
            }
            let Ok(id) = field.parse::<u64>().map(ConnectionId) else {
                continue;
            };
            if id.node() != node {
                continue;
            }
            let user = if value.is_empty() {
                None
            } else {
                UserId::new(value).ok()
            };
            view.members.insert(id, user);
        }
        view
    }

    /// Its members as the hub lists them.
    pub(crate) fn members(&self) -> impl Iterator<Item = Member> + '_ {
        self.members.iter().map(|(id, user)| Member {
            id: *id,
            user: user.clone(),
        })
    }
}

/// The views of the groups this node has members in.
#[derive(Debug, Default)]
pub(crate) struct Mirror {
    groups: HashMap<String, HashMap<u16, View>>,
    /// The groups whose views were read since they were followed.
    loaded: HashSet<String>,
    /// Views a notice said are behind, to read again.
    stale: HashSet<(String, u16)>,
    /// The token of the process whose views of each node are held (its
    /// liveness key's value when they were read): a node id that another
    /// process holds now is a node that died, even if its key never went
    /// missing in between.
    owners: HashMap<u16, String>,
    /// For each group, the nodes whose notice announced a version above
    /// the view held: they may have members not read yet. Kept when a
    /// node id changes process (the new one's notices), cleared when the
    /// view read reaches the version, the node dies or the group is left.
    announced: HashMap<String, HashMap<u16, u64>>,
}

impl Mirror {
    /// Starts following `group`; false when it was followed already.
    pub(crate) fn track(&mut self, group: &str) -> bool {
        if self.groups.contains_key(group) {
            return false;
        }
        self.groups.insert(group.to_owned(), HashMap::new());
        true
    }

    /// Stops following `group` (no member left here): forgets its views.
    pub(crate) fn untrack(&mut self, group: &str) {
        self.groups.remove(group);
        self.loaded.remove(group);
        self.stale.retain(|(stale, _)| stale != group);
        self.announced.remove(group);
    }

    /// The views of `group` were read: its members can be listed.
    pub(crate) fn mark_loaded(&mut self, group: &str) {
        if self.groups.contains_key(group) {
            self.loaded.insert(group.to_owned());
        }
    }

    /// The other nodes' members of `group`, once its views were read: what
    /// the presence events that follow change.
    pub(crate) fn members(&self, group: &str) -> Option<Vec<Member>> {
        if !self.loaded.contains(group) {
            return None;
        }
        let views = self.groups.get(group)?;
        Some(views.values().flat_map(View::members).collect())
    }

    /// Whether no other node has a member of `group`, as far as this node
    /// can tell: it follows the group, has read its views, every view is
    /// empty, and no notice announced a version not read yet. `false`
    /// whenever it cannot tell (a group with no member here is not
    /// followed).
    pub(crate) fn alone(&self, group: &str) -> bool {
        if !self.loaded.contains(group) {
            return false;
        }
        let Some(views) = self.groups.get(group) else {
            return false;
        };
        views.values().all(|view| view.members.is_empty())
            && self
                .announced
                .get(group)
                .is_none_or(|pending| pending.is_empty())
    }

    /// Node `node` wrote (or is about to write) its members of `group` at
    /// `version`: whether its view must be read again. Until a view at
    /// that version or later is read, the node counts as having members
    /// (see [`alone`](Self::alone)).
    pub(crate) fn notice(&mut self, group: &str, node: u16, version: u64) -> bool {
        let Some(views) = self.groups.get(group) else {
            return false;
        };
        let behind = views
            .get(&node)
            .and_then(|view| view.version)
            .is_none_or(|known| known < version);
        if !behind {
            return false;
        }
        let pending = self
            .announced
            .entry(group.to_owned())
            .or_default()
            .entry(node)
            .or_default();
        *pending = (*pending).max(version);
        self.stale.insert((group.to_owned(), node))
    }

    /// The views to read again, taken.
    pub(crate) fn take_stale(&mut self) -> Vec<(String, u16)> {
        self.stale.drain().collect()
    }

    /// Puts `view`, read from Redis, in place of node `node`'s view of
    /// `group`, unless the one held is newer; the events of the change
    /// (none when `quietly`: a group just followed, whose members the
    /// application reads itself).
    pub(crate) fn apply(
        &mut self,
        group: &str,
        node: u16,
        view: View,
        quietly: bool,
    ) -> Vec<PresenceEvent> {
        let Some(views) = self.groups.get_mut(group) else {
            return Vec::new();
        };
        let held = views.entry(node).or_default();
        if let Some(read) = view.version {
            caught_up(&mut self.announced, group, node, read);
        }
        match (held.version, view.version) {
            (Some(known), Some(read)) if read <= known => return Vec::new(),
            _ => {}
        }
        let version = view.version.or(held.version);
        let old = std::mem::replace(&mut held.members, view.members);
        held.version = version;
        if quietly {
            return Vec::new();
        }
        diff(group, &old, &held.members)
    }

    /// The nodes with a view of `group`.
    pub(crate) fn nodes_of(&self, group: &str) -> HashSet<u16> {
        self.groups
            .get(group)
            .map(|views| views.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets the notices of versions before `since` that no view read
    /// has reached: one a time to live old whose view still reads without
    /// a version (the node's membership key expired, or was never
    /// written: it has no member) would otherwise keep the group from
    /// ever counting as alone.
    pub(crate) fn expire_notices(&mut self, since: u64) {
        for pending in self.announced.values_mut() {
            pending.retain(|_, version| *version >= since);
        }
        self.announced.retain(|_, pending| !pending.is_empty());
    }

    /// Every node with a view or a notice not read yet.
    pub(crate) fn nodes(&self) -> HashSet<u16> {
        self.groups
            .values()
            .flat_map(|views| views.keys().copied())
            .chain(
                self.announced
                    .values()
                    .flat_map(|pending| pending.keys().copied()),
            )
            .collect()
    }

    /// Node `node`'s views (read with the views of a group) belong to the
    /// process of `token` (`None`: no process holds the id). When another
    /// process held it before, that one died: its members are lost from
    /// every group (the events), and its views are read again for the new
    /// one ([`take_stale`](Self::take_stale)).
    pub(crate) fn owned_by(&mut self, node: u16, token: Option<&str>) -> Vec<PresenceEvent> {
        let Some(token) = token else {
            return Vec::new();
        };
        match self.owners.get(&node) {
            Some(owner) if owner == token => Vec::new(),
            Some(_) => {
                // The new process's notices still stand.
                let events = self.drop_views(node);
                for group in self.groups.keys() {
                    self.stale.insert((group.clone(), node));
                }
                self.owners.insert(node, token.to_owned());
                events
            }
            None => {
                self.owners.insert(node, token.to_owned());
                Vec::new()
            }
        }
    }

    /// Forgets node `node` (its liveness key expired): its members are
    /// lost from every group. Its notices of versions `since` or later
    /// still stand (the node announced a member that recently: it may be
    /// a node that lost Redis for a while and is coming back, subscribed
    /// already, before it registers again), and it stays among
    /// [`nodes`](Self::nodes) until they are read or too old.
    pub(crate) fn drop_node(&mut self, node: u16, since: u64) -> Vec<PresenceEvent> {
        for pending in self.announced.values_mut() {
            if pending.get(&node).is_some_and(|version| *version < since) {
                pending.remove(&node);
            }
        }
        self.announced.retain(|_, pending| !pending.is_empty());
        self.drop_views(node)
    }

    /// Forgets what was read of node `node`: its members are lost from
    /// every group.
    fn drop_views(&mut self, node: u16) -> Vec<PresenceEvent> {
        let mut events = Vec::new();
        for (group, views) in &mut self.groups {
            if let Some(view) = views.remove(&node) {
                events.extend(view.members().map(|member| {
                    PresenceEvent::new(group.as_str(), member, PresenceChange::Lost)
                }));
            }
        }
        self.stale.retain(|(_, stale)| *stale != node);
        self.owners.remove(&node);
        events
    }
}

/// Node `node`'s view of `group` was read at version `read`: a notice it
/// reaches no longer stands.
fn caught_up(
    announced: &mut HashMap<String, HashMap<u16, u64>>,
    group: &str,
    node: u16,
    read: u64,
) {
    let Some(pending) = announced.get_mut(group) else {
        return;
    };
    if pending.get(&node).is_some_and(|version| *version <= read) {
        pending.remove(&node);
        if pending.is_empty() {
            announced.remove(group);
        }
    }
}

/// The events that turn `old` into `new`.
fn diff(
    group: &str,
    old: &BTreeMap<ConnectionId, Option<UserId>>,
    new: &BTreeMap<ConnectionId, Option<UserId>>,
) -> Vec<PresenceEvent> {
    let event = |id: &ConnectionId, user: &Option<UserId>, change| {
        let member = Member {
            id: *id,
            user: user.clone(),
        };
        PresenceEvent::new(group, member, change)
    };
    let mut events = Vec::new();
    for (id, user) in old {
        if !new.contains_key(id) {
            events.push(event(id, user, PresenceChange::Left));
        }
    }
    for (id, user) in new {
        match old.get(id) {
            None => events.push(event(id, user, PresenceChange::Joined)),
            Some(before) if before != user => {
                let member = Member {
                    id: *id,
                    user: user.clone(),
                };
                events.push(PresenceEvent::updated(group, member, before.clone()));
            }
            Some(_) => {}
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(version: u64, members: &[(u64, &str)]) -> View {
        View {
            version: Some(version),
            members: members
                .iter()
                .map(|(local, user)| {
                    let user = (!user.is_empty()).then(|| UserId::new(*user).unwrap());
                    (ConnectionId::new(2, *local), user)
                })
                .collect(),
        }
    }

    fn changes(events: &[PresenceEvent]) -> Vec<(u64, PresenceChange)> {
        events
            .iter()
            .map(|event| (event.member.id.local(), event.change))
            .collect()
    }

    #[test]
    fn a_view_reports_its_differences_and_never_goes_back() {
        let mut mirror = Mirror::default();
        assert!(mirror.track("lobby"));
        assert!(
            mirror
                .apply("lobby", 2, view(10, &[(1, "ann")]), true)
                .is_empty()
        );
        let events = mirror.apply("lobby", 2, view(12, &[(1, "anne"), (2, "")]), false);
        assert_eq!(
            changes(&events),
            [(1, PresenceChange::Updated), (2, PresenceChange::Joined)]
        );
        assert_eq!(events[0].previous_user.as_deref(), Some("ann"));
        assert_eq!(events[1].previous_user, None);
        // An older read changes nothing.
        assert!(mirror.apply("lobby", 2, view(11, &[]), false).is_empty());
        let events = mirror.apply("lobby", 2, view(13, &[(2, "")]), false);
        assert_eq!(changes(&events), [(1, PresenceChange::Left)]);
        // A key gone: empty, at the version held.
        let gone = View::default();
        let events = mirror.apply("lobby", 2, gone, false);
        assert_eq!(changes(&events), [(2, PresenceChange::Left)]);
        // Groups not followed are ignored.
        assert!(
            mirror
                .apply("elsewhere", 2, view(1, &[(1, "")]), false)
                .is_empty()
        );
    }

    #[test]
    fn members_are_listed_once_read() {
        let mut mirror = Mirror::default();
        mirror.track("lobby");
        assert_eq!(mirror.members("lobby"), None, "not read yet");
        mirror.apply("lobby", 2, view(10, &[(1, "ann")]), true);
        mirror.mark_loaded("lobby");
        let members = mirror.members("lobby").unwrap();
        assert_eq!(members.len(), 1);
        assert_eq!(members[0].user.as_deref(), Some("ann"));
        mirror.untrack("lobby");
        mirror.mark_loaded("lobby");
        assert_eq!(mirror.members("lobby"), None, "not followed");
    }

    #[test]
    fn notices_mark_only_views_behind() {
        let mut mirror = Mirror::default();
        mirror.track("lobby");
        mirror.apply("lobby", 2, view(10, &[(1, "")]), true);
        assert!(!mirror.notice("lobby", 2, 10));
        assert!(mirror.notice("lobby", 2, 11));
        assert!(!mirror.notice("lobby", 2, 12), "already marked");
        assert!(mirror.notice("lobby", 3, 1), "a node not seen yet");
        assert!(!mirror.notice("other", 2, 99), "a group not followed");
        let mut stale = mirror.take_stale();
        stale.sort();
        assert_eq!(stale, [("lobby".to_owned(), 2), ("lobby".to_owned(), 3)]);
    }

    #[test]
    fn a_dead_node_loses_its_members_everywhere() {
        let mut mirror = Mirror::default();
        mirror.track("a");
        mirror.track("b");
        mirror.apply("a", 2, view(1, &[(1, "ann")]), true);
        mirror.apply("b", 2, view(1, &[(1, "ann"), (2, "bob")]), true);
        let mut events = changes(&mirror.drop_node(2, 0));
        events.sort_by_key(|(local, _)| *local);
        assert_eq!(
            events,
            [
                (1, PresenceChange::Lost),
                (1, PresenceChange::Lost),
                (2, PresenceChange::Lost)
            ]
        );
        assert!(mirror.nodes().is_empty());
    }

    #[test]
    fn a_node_id_held_by_another_process_loses_the_old_ones_members() {
        let mut mirror = Mirror::default();
        mirror.track("a");
        mirror.track("b");
        assert!(mirror.owned_by(2, Some("first")).is_empty());
        mirror.apply("a", 2, view(5, &[(1, "ann")]), true);
        assert!(mirror.owned_by(2, Some("first")).is_empty(), "the same");
        assert!(
            mirror.owned_by(2, None).is_empty(),
            "dead: for the TTL to say"
        );
        let events = mirror.owned_by(2, Some("second"));
        assert_eq!(changes(&events), [(1, PresenceChange::Lost)]);
        // The new process's views are read, whatever their version.
        let mut stale = mirror.take_stale();
        stale.sort();
        assert_eq!(stale, [("a".to_owned(), 2), ("b".to_owned(), 2)]);
        let events = mirror.apply("a", 2, view(1, &[(1, "bob")]), false);
        assert_eq!(changes(&events), [(1, PresenceChange::Joined)]);
    }

    #[test]
    fn a_group_is_alone_only_when_every_view_read_is_empty_and_no_notice_is_pending() {
        let mut mirror = Mirror::default();
        assert!(!mirror.alone("lobby"), "not followed: unknown");
        mirror.track("lobby");
        assert!(!mirror.alone("lobby"), "not read yet");
        mirror.apply("lobby", 2, view(10, &[]), true);
        mirror.mark_loaded("lobby");
        assert!(mirror.alone("lobby"));
        // Node 3 announces a first member: not alone until a view of node
        // 3 at that version is read, even if an older one comes first.
        assert!(mirror.notice("lobby", 3, 20));
        assert!(!mirror.alone("lobby"));
        mirror.apply("lobby", 3, View::default(), false);
        assert!(!mirror.alone("lobby"), "its key not written yet");
        mirror.apply("lobby", 3, view(15, &[]), false);
        assert!(!mirror.alone("lobby"), "older than the notice");
        mirror.apply("lobby", 3, view(21, &[(1, "")]), false);
        assert!(!mirror.alone("lobby"), "a member");
        mirror.apply("lobby", 3, view(22, &[]), false);
        assert!(mirror.alone("lobby"), "it left");
        // A notice pending for a node that dies goes with it once older
        // than a node's time to live; a recent one stands (the node may be
        // coming back, subscribed, before it registers), and the node is
        // still checked.
        mirror.notice("lobby", 4, 30);
        assert!(!mirror.alone("lobby"));
        mirror.drop_node(4, 30);
        assert!(!mirror.alone("lobby"), "a recent notice stands");
        assert!(mirror.nodes().contains(&4));
        mirror.drop_node(4, 31);
        assert!(mirror.alone("lobby"));
        assert!(!mirror.nodes().contains(&4));
        // A live node's notice whose view keeps reading without a version
        // (its key expired or was never written) stands a time to live.
        mirror.notice("lobby", 5, 35);
        mirror.apply("lobby", 5, View::default(), false);
        mirror.expire_notices(35);
        assert!(!mirror.alone("lobby"), "a recent notice stands");
        mirror.expire_notices(36);
        assert!(mirror.alone("lobby"), "an old one goes");
        // A node id taken by another process: the new one's notice stands.
        assert!(mirror.owned_by(2, Some("first")).is_empty());
        mirror.notice("lobby", 2, 40);
        mirror.owned_by(2, Some("second"));
        assert!(!mirror.alone("lobby"));
        mirror.untrack("lobby");
        assert!(!mirror.alone("lobby"), "not followed");
        mirror.track("lobby");
        mirror.mark_loaded("lobby");
        assert!(mirror.alone("lobby"), "nothing pending once left");
    }

    #[test]
    fn hashes_are_read_leniently() {
        let fields = vec![
            ("v".to_owned(), "42".to_owned()),
            (ConnectionId::new(2, 1).0.to_string(), "ann".to_owned()),
            (ConnectionId::new(2, 2).0.to_string(), String::new()),
            // Another node's id, a bad user id, junk: ignored or anonymous.
            (ConnectionId::new(3, 1).0.to_string(), "eve".to_owned()),
            (ConnectionId::new(2, 3).0.to_string(), "a\nb".to_owned()),
            ("junk".to_owned(), "x".to_owned()),
        ];
        let view = View::parse(2, fields);
        assert_eq!(view.version, Some(42));
        let users: Vec<_> = view.members().map(|member| member.user).collect();
        assert_eq!(users, [Some(UserId::new("ann").unwrap()), None, None]);
    }
}
