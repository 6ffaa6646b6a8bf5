// The room game's page (examples/rooms.rs serves it): a form to log in and
// join, the board, and the arrow keys to move. The game itself is rooms.js.
import { Game } from './rooms.js';
import { TernioError } from './ternio.js';

const $ = (selector) => document.querySelector(selector);
const BOARD = 16;

function say(text) {
  $('#status').textContent = text;
}

function reason(error) {
  return error instanceof TernioError && error.kind === 'remote' ? error.remoteMessage : String(error?.message ?? error);
}

function draw(game) {
  const cells = Array.from({ length: BOARD * BOARD }, () => '·');
  for (const [name, { x, y }] of game.players) cells[y * BOARD + x] = name[0].toUpperCase();
  const rows = [];
  for (let y = 0; y < BOARD; y++) rows.push(cells.slice(y * BOARD, (y + 1) * BOARD).join(' '));
  $('#board').textContent = rows.join('\n');
  $('#players').textContent = [...game.players.keys()].sort().join(', ');
  $('#moves').textContent = String(game.moves);
}

async function websocketUrl() {
  const given = new URLSearchParams(location.search).get('ws');
  if (given) return given;
  const { websocket } = await (await fetch('config.json', { cache: 'no-store' })).json();
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  return `${scheme}://${location.hostname}:${websocket.port}${websocket.path}`;
}

const KEYS = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

$('#join-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('#join').disabled = true;
  try {
    const game = await Game.connect(await websocketUrl(), draw);
    game.client.closed.then(({ disconnect }) => say(`disconnected${disconnect ? `: ${disconnect.reasonName} ${disconnect.message}` : ''}`));
    const { level } = await game.login($('#name').value.trim(), $('#token').value);
    const { room } = await game.join($('#room').value.trim());
    say(`in ${room}${level >= 2 ? ' (admin)' : ''}: move with the arrow keys`);
    document.addEventListener('keydown', (key) => {
      const step = KEYS[key.key];
      if (!step) return;
      key.preventDefault();
      game.move(...step).catch((error) => say(`not moved: ${reason(error)}`));
    });
  } catch (error) {
    say(`cannot play: ${reason(error)}`);
    $('#join').disabled = false;
  }
});
