import type { Router } from 'express';
import type { GatewayClients } from '../clients';
import { pingRoutes } from './ping';

/**
 * Every public `/api/v1` router, in one list. Each resource has its own file in this folder; add a
 * line here to mount a new one.
 */
export function publicRouters(clients: GatewayClients): Router[] {
  void clients;
  return [pingRoutes()];
}
