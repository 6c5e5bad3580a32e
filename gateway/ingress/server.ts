// The HTTP/1.1 server: match the route, run its handler, turn anything thrown into an error
// response. Handlers own the response once they run.
import { createServer, type Server } from 'node:http';
import { writeError } from '../egress/write';
import { createContext } from './context';
import { matchRoute, type Route } from './router';

export function createHttpServer(routes: readonly Route[]): Server {
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    let match;
    try {
      match = matchRoute(routes, req.method, req.url);
    } catch (err) {
      req.resume();
      writeError(res, err);
      return;
    }
    const ctx = createContext(req, res, match.params);
    match.handler(ctx).catch((err: unknown) => {
      req.resume(); // an answer before the body was read: let the rest drain
      if (!ctx.signal.aborted) writeError(res, err);
    });
  });
  return server;
}
