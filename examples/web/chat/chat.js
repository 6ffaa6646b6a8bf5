/**
 * The chat page of examples/chat_server.rs: connects to the server's
 * WebSocket listener with the browser SDK (ternio.js), takes a nickname,
 * joins one room at a time, says things there and shows what the server
 * pushes to the room. Terminal clients (examples/chat_client.rs) and other
 * pages in the same room see the same conversation.
 *
 * The packets come from packets.js, which sdk-js's ternio-codegen
 * generated from the server's schema (examples/schemas/chat_server.json):
 * typed field for field as examples/src/chat.rs declares them (packets.d.ts
 * holds their types), with each request's answer.
 */
import { Client, TernioError } from './ternio.js';
import { SetNick, JoinRoom, LeaveRoom, Say, UserJoined, UserLeft, ChatMessage } from './packets.js';

const $ = (selector) => document.querySelector(selector);

/** What this page has on the server. */
const session = {
  /** @type {Client|null} */
  client: null,
  /** The nickname the server gave us. */
  nick: null,
  /** The room we are in. */
  room: null,
  /** The room we are joining, while its JoinRoom waits for its answer. */
  joining: null,
  /** Joins and leaves pushed while joining, applied after the answer's member list. */
  early: [],
  /** The nicknames in our room. */
  members: new Set(),
};

function setStatus(text, isError = false) {
  const status = $('#status');
  status.textContent = text;
  status.classList.toggle('error', isError);
}

/** Adds a line to the log; `kind` is 'message', 'event' or 'error'. Text only, never HTML. */
function log(kind, text, nick) {
  const line = document.createElement('li');
  line.className = kind;
  if (nick !== undefined) {
    const who = document.createElement('span');
    who.className = 'nick';
    who.textContent = nick;
    line.append(who, `: ${text}`);
  } else {
    line.textContent = text;
  }
  const list = $('#log');
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 8;
  list.append(line);
  if (atBottom) list.scrollTop = list.scrollHeight;
}

function renderMembers() {
  const list = $('#members');
  list.replaceChildren(...[...session.members].sort().map((nick) => {
    const item = document.createElement('li');
    item.textContent = nick;
    if (nick === session.nick) item.className = 'me';
    return item;
  }));
}

/** The server's own words for an error it sent, or the error's message. */
function reason(error) {
  if (error instanceof TernioError && error.kind === 'remote') return error.remoteMessage;
  return error?.message ?? String(error);
}

function enable(joining, saying) {
  for (const id of ['#nick', '#room', '#join']) $(id).disabled = !joining;
  for (const id of ['#text', '#send']) $(id).disabled = !saying;
  $('#text').placeholder = saying ? `say something in ${session.room}` : 'join a room to chat';
}

/**
 * The WebSocket URL: the page's `?ws=` parameter, or the port and path
 * that config.json gives, on the host this page came from.
 */
async function websocketUrl() {
  const given = new URLSearchParams(location.search).get('ws');
  if (given) return given;
  const response = await fetch('config.json', { cache: 'no-store' });
  if (!response.ok) throw new Error(`config.json: HTTP ${response.status}`);
  const { websocket } = await response.json();
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  // For an IPv6 address, location.hostname keeps its brackets.
  return `${scheme}://${location.hostname}:${websocket.port}${websocket.path}`;
}

/** Whether a push about `room` concerns us now. */
const ours = (room) => room === session.room || room === session.joining;

function onJoined({ room, nick }) {
  if (!ours(room)) return;
  if (session.joining === room) session.early.push(['join', nick]);
  session.members.add(nick);
  renderMembers();
  if (nick !== session.nick) log('event', `${nick} joined`);
}

function onLeft({ room, nick }) {
  if (!ours(room)) return;
  if (session.joining === room) session.early.push(['leave', nick]);
  session.members.delete(nick);
  renderMembers();
  log('event', `${nick} left`);
}

function onMessage({ room, nick, text }) {
  if (ours(room)) log('message', text, nick);
}

async function connect() {
  let url;
  try {
    url = await websocketUrl();
  } catch (error) {
    setStatus(`cannot find the chat server: ${error.message}`, true);
    return;
  }
  setStatus(`connecting to ${url}…`);
  let client;
  try {
    client = await Client.connect(url, { onError: (error) => log('error', reason(error)) });
  } catch (error) {
    setStatus(`cannot connect to ${url}: ${reason(error)}`, true);
    return;
  }
  session.client = client;
  client.on(ChatMessage, onMessage);
  client.on(UserJoined, onJoined);
  client.on(UserLeft, onLeft);
  client.closed.then(({ code, disconnect }) => {
    const why = disconnect
      ? `${disconnect.reasonName}${disconnect.message ? `: ${disconnect.message}` : ''}`
      : `WebSocket close code ${code}`;
    setStatus(`disconnected (${why}); reload the page to connect again`, true);
    enable(false, false);
  });
  setStatus(`connected to ${url}`);
  enable(true, false);
  $('#nick').focus();
}

/** Takes the nickname, then joins the room (leaving the one before). */
async function join(nick, room) {
  const client = session.client;
  if (nick !== session.nick) {
    await client.request(SetNick, { nick });
    const before = session.nick;
    session.nick = nick;
    if (before !== null && session.members.delete(before)) session.members.add(nick);
    renderMembers();
    log('event', `you are ${nick}`);
  }
  if (room === session.room) return;
  const previous = session.room;
  session.joining = room;
  session.early = [];
  let info;
  try {
    info = await client.request(JoinRoom, { room });
  } finally {
    session.joining = null;
  }
  session.room = info.room;
  session.members = new Set(info.members);
  // Joins and leaves that crossed the answer on the way.
  for (const [what, who] of session.early) {
    if (what === 'join') session.members.add(who);
    else session.members.delete(who);
  }
  session.early = [];
  renderMembers();
  $('#room-title').textContent = `#${info.room}`;
  log('event', `you joined ${info.room}; here: ${info.members.join(', ')}`);
  // One room at a time, as the terminal client does.
  if (previous !== null && previous !== info.room) {
    await client.request(LeaveRoom, { room: previous }).catch(() => {});
  }
}

$('#join-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const nick = $('#nick').value.trim();
  const room = $('#room').value.trim();
  if (!session.client?.isOpen || !nick || !room) return;
  enable(false, session.room !== null);
  try {
    await join(nick, room);
  } catch (error) {
    log('error', `cannot join ${room} as ${nick}: ${reason(error)}`);
  } finally {
    if (session.client.isOpen) enable(true, session.room !== null);
  }
});

$('#say-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = $('#text');
  const text = input.value;
  if (!session.client?.isOpen || session.room === null || text.trim() === '') return;
  try {
    // The server pushes the message back to every member, us included:
    // it shows up in the log when that push arrives.
    await session.client.request(Say, { room: session.room, text });
    input.value = '';
  } catch (error) {
    log('error', `not said: ${reason(error)}`);
  }
});

connect();
