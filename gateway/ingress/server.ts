// The HTTP/1.1 server: match the route, run its handler, turn anything thrown into an error
// response. Handlers own the response once they run.
import { createServer, type Server } from 'node:http';
import { writeError } from '../egress/write';
import { createContext } from './context';
import { type AccessTable, matchRoute, type Route } from './router';

export function createHttpServer(routes: readonly Route[], access?: AccessTable): Server {
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    let match;
    try {
      match = matchRoute(routes, req.method, req.url, access, req.headers);
    } catch (err) {
      req.resume();
      writeError(res, err);
      return;
    }
    const ctx = createContext(req, res, match.params);
    match.handler(ctx).catch((err: unknown) => {
      if (!ctx.signal.aborted) writeError(res, err);
    });
  });
  return server;
}
