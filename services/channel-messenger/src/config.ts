import { readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

export type MessengerConfig = SenderBaseConfig;

export function buildConfig(env: Env): MessengerConfig {
  return senderBaseConfig(readEnv({ ...senderEnvShape, OPS_PORT: senderEnvShape.OPS_PORT.removeDefault().default(9468) }, env));
}
