//! Smoke test of the game example (`ternio_examples::game`): a server whose
//! room ticks at 30 Hz and three bots for about two seconds, two with a
//! datagram channel (their snapshots come by datagram) and one without
//! (on the stream). Every bot gets snapshots in tick order, its inputs move
//! its player, and the room keeps its rate.

use std::time::Duration;

use ternio::Server;
use ternio::protocol::Encode;
use ternio::protocol::datagram::DATAGRAM_OVERHEAD;
use ternio::protocol::frame::HEADER_LEN;
use ternio_examples::game::{
    self, BotConfig, Game, INPUT_LEN, Input, MAX_PLAYERS, PlayerState, Snapshot,
    snapshot_datagram_len, snapshot_len,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_get_snapshots_in_tick_order_and_their_inputs_move_them() {
    let game = Game::new();
    let server = game::serve(Server::builder().discover_controllers(false), game.clone())
        .map_tcp("127.0.0.1:0")
        .map_udp("127.0.0.1:0")
        .build()
        .expect("the game server builds");
    let address = server.tcp_addrs()[0];
    let handle = server.handle();
    let running = tokio::spawn(server.run());

    const BOTS: usize = 3;
    let duration = Duration::from_secs(2);
    let bots: Vec<_> = (0..BOTS)
        .map(|index| {
            let mut config = BotConfig::new(index, "arena", duration);
            // The last bot binds no datagram channel.
            config.datagrams = index + 1 < BOTS;
            tokio::spawn(game::run_bot(address, config))
        })
        .collect();
    let mut reports = Vec::new();
    for bot in bots {
        let report = tokio::time::timeout(Duration::from_secs(10), bot)
            .await
            .expect("the bot finishes")
            .expect("the bot task does not panic")
            .expect("the bot plays without error");
        reports.push(report);
    }

    for report in &reports {
        // 2 s at 30 Hz is 60 snapshots; leave room for a slow machine.
        assert!(
            report.snapshots >= 30,
            "{}: only {} snapshots",
            report.name,
            report.snapshots
        );
        assert_eq!(
            report.out_of_order, 0,
            "{}: snapshots out of tick order",
            report.name
        );
        let (first, last) = report.ticks.expect("ticks were seen");
        assert_eq!(
            u64::from(last - first) + 1,
            report.snapshots + report.gaps,
            "{}: every tick from the first to the last is a snapshot or a gap",
            report.name
        );
        assert_eq!(report.datagrams, report.name != "bot-2", "{}", report.name);
        // Nothing is behind on loopback at this load: no drops on the
        // stream. A datagram may be lost even on loopback (a full socket
        // buffer on a loaded machine): a few gaps are allowed there.
        if report.datagrams {
            assert!(
                report.gaps * 10 <= report.snapshots,
                "{}: {} gaps",
                report.name,
                report.gaps
            );
        } else {
            assert_eq!(report.gaps, 0, "{}: gaps in the ticks", report.name);
        }
        assert_eq!(report.buffer_dropped, 0);
        assert!(
            report.inputs >= 30,
            "{}: {} inputs",
            report.name,
            report.inputs
        );
        assert!(
            report.acked_input > 0,
            "{}: no input was applied",
            report.name
        );
        // At 20 units per second, well over a second of moving.
        assert!(
            report.travelled > 20.0,
            "{}: travelled only {}",
            report.name,
            report.travelled
        );
        assert_eq!(report.most_players, BOTS, "{}: saw everyone", report.name);
    }

    let stats = game.stats();
    // 60 ticks in 2 s at 30 Hz; a loaded machine may skip some, which the
    // room counts.
    assert!(
        stats.ticks + stats.skipped >= 45,
        "only {} ticks and {} skipped in over 2 s",
        stats.ticks,
        stats.skipped
    );
    assert_eq!(stats.dropped, 0);
    // Two bots of three bound a datagram channel: about two thirds of the
    // snapshots went by datagram (the first ones after a join may take the
    // stream, before the server knows where the bot's socket is).
    assert!(
        stats.by_datagram * 3 >= stats.queued && stats.by_datagram < stats.queued,
        "{} of {} by datagram",
        stats.by_datagram,
        stats.queued
    );
    // A bot that closed before its connection left the room may miss the
    // last tick's snapshot ("failed": the connection was closing).
    assert!(stats.failed <= BOTS as u64, "{} failed", stats.failed);
    // Every snapshot a bot got was queued.
    let received: u64 = reports.iter().map(|report| report.snapshots).sum();
    assert!(stats.queued >= received, "{} < {received}", stats.queued);
    assert!(stats.bytes > 0);
    // Three bots' inputs at one a tick never fill a queue of 64.
    assert_eq!(stats.inputs_refused, 0);
    // The bots closed: the disconnect hook took their seats, and the room
    // its members. The hook runs on the server after a bot's close
    // returned, and notes the departure last.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while game.departures().len() < BOTS {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            game.departures()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(game.players().is_empty(), "{:?}", game.players());
    assert!(handle.hub().members("arena").is_empty());
    // Its last player gone, the room stopped and went (no room ticks for
    // nobody, and leaving frees the place for another room); its figures
    // stay in the game's.
    assert!(game.rooms().is_empty(), "{:?}", game.rooms());
    assert!(game.stats().ticks >= stats.ticks);
    assert!(game.stats().queued >= stats.queued);
    game.stop();
    let departures = game.departures();
    assert_eq!(departures.len(), BOTS, "{departures:?}");
    assert!(departures.iter().all(|departure| departure.dropped == 0));

    handle.shutdown();
    running.await.unwrap().unwrap();
}

/// The sizes the example's per-player report explains its figures with are
/// the sizes of the frames it sends.
#[test]
fn the_reported_frame_sizes_are_the_encoded_ones() {
    let player = PlayerState {
        id: 7,
        x: 1.0,
        y: 2.0,
        last_input: 3,
    };
    for players in [0, 1, 3, 127, 128, 300] {
        let snapshot = Snapshot {
            tick: 42,
            players: vec![player; players],
        };
        assert_eq!(
            snapshot.wire_len(),
            snapshot_len(players),
            "{players} players"
        );
        assert_eq!(
            snapshot.datagram_len(),
            snapshot_datagram_len(players),
            "{players} players"
        );
        assert_eq!(
            snapshot.datagram_len(),
            (DATAGRAM_OVERHEAD + HEADER_LEN + snapshot.encoded_len()) as u64
        );
    }
    // A full room's snapshot fits in one datagram of the default size.
    let limit = ternio::ServerConfig::default().max_datagram_size as u64;
    assert!(snapshot_datagram_len(MAX_PLAYERS) <= limit);
    let input = Input {
        seq: 9,
        dx: -1,
        dy: 1,
    };
    assert_eq!(4 + HEADER_LEN + input.encoded_len(), INPUT_LEN);
}
