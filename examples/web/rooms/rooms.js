// The room game's client side (docs/GUIDE.md, "The browser page"): a Game
// that logs in, joins a room, keeps the board from the server's pushes and
// moves. The packets come from packets.js, generated from the server's
// schema (examples/schemas/rooms.json) by sdk-js's ternio-codegen.
// No DOM here: page.js draws, and sdk-js/test/rooms.test.js plays it in Node.
import { Client } from './ternio.js';
import { Login, JoinRoom, Move, Moved, Left } from './packets.js';

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
