// loopback.cjs: preloaded (node --require) into the npm MCP servers the
// system tests run, so a server that listens on a bare port binds
// 127.0.0.1 only and never the machine's other interfaces.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    const rest = args.slice(1).filter((a) => typeof a === "function");
    return listen.call(this, { port: Number(port), host: "127.0.0.1" }, ...rest);
  }
  return listen.apply(this, args);
};
