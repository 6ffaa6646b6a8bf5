// The room game's client side (docs/GUIDE.md, "The browser page"): the
// packets of examples/src/rooms.rs, field for field, and a Game that logs
// in, joins a room, keeps the board from the server's pushes and moves.
// No DOM here: page.js draws, and sdk-js/test/rooms.test.js plays it in Node.
import { Client, packet, struct, string, vec, u8, i8, u32, u64 } from './ternio.js';

const Player = struct({ name: string, x: u8, y: u8 }, 'Player');
const Welcome = packet(0x0301, { name: string, level: u32 }, { name: 'Welcome' });
const Login = packet(0x0300, { name: string, token: string }, { name: 'Login', response: Welcome });
const RoomState = packet(0x0303, { room: string, players: vec(Player) }, { name: 'RoomState' });
const JoinRoom = packet(0x0302, { room: string }, { name: 'JoinRoom', response: RoomState });
const Move = packet(0x0304, { dx: i8, dy: i8 }, { name: 'Move' });
const Moved = packet(0x0310, { room: string, player: Player, moves: u64 }, { name: 'Moved' });
const Left = packet(0x0311, { room: string, name: string }, { name: 'Left' });

export class Game {
  /** Connects to `url` (ws:// or wss://); `onChange(game)` runs after every change of the board. */
  static async connect(url, onChange = () => {}) {
    const client = await Client.connect(url);
    return new Game(client, onChange);
  }

  constructor(client, onChange) {
    this.client = client;
    this.onChange = onChange;
    this.room = null;
    this.players = new Map(); // name → { x, y }
    this.moves = 0n;
    client.on(Moved, ({ room, player, moves }) => {
      if (room !== this.room) return;
      this.players.set(player.name, { x: player.x, y: player.y });
      this.moves = moves;
      this.onChange(this);
    });
    client.on(Left, ({ room, name }) => {
      if (room !== this.room) return;
      this.players.delete(name);
      this.onChange(this);
    });
  }

  /** Logs in; resolves with `{ name, level }`. */
  login(name, token = '') {
    return this.client.request(Login, { name, token });
  }

  /** Joins `room`: the answer holds the board, the pushes keep it. */
  async join(room) {
    this.room = room;
    const state = await this.client.request(JoinRoom, { room });
    this.players = new Map(state.players.map((p) => [p.name, { x: p.x, y: p.y }]));
    this.onChange(this);
    return state;
  }

  /** One step; the server pushes the new place to the room, us included. */
  move(dx, dy) {
    return this.client.request(Move, { dx, dy });
  }

  close() {
    return this.client.close();
  }
}
