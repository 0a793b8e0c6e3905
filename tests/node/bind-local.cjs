// Preloaded into Node servers under test (`node --require bind-local.cjs …`): whatever address
// and port a server asks for, it listens on 127.0.0.1 at $BIND_PORT (0 when unset, an
// ephemeral port), and reports the port it got on stderr as `LISTENING <port>`.
"use strict";
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const callback = typeof args[args.length - 1] === "function" ? args.pop() : undefined;
  this.once("listening", () => {
    process.stderr.write(`LISTENING ${this.address().port}\n`);
  });
  const port = Number(process.env.BIND_PORT || 0);
  return listen.call(this, { host: "127.0.0.1", port }, callback);
};
