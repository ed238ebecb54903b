// Preloaded into a Node server under test (`node -r loopback.cjs …`): every listen() binds to
// 127.0.0.1 only, whatever host the server asked for. Test servers never listen beyond loopback.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    const port = args[0];
    const rest = args.slice(1).filter((a) => typeof a === "function");
    return listen.call(this, { port: Number(port), host: "127.0.0.1" }, ...rest);
  }
  if (args[0] && typeof args[0] === "object" && !(args[0] instanceof net.Server)) {
    return listen.call(this, { ...args[0], host: "127.0.0.1" }, ...args.slice(1));
  }
  return listen.apply(this, args);
};
