import { readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

export type EmailConfig = SenderBaseConfig;

export function buildConfig(env: Env): EmailConfig {
  return senderBaseConfig(readEnv({ ...senderEnvShape }, env));
}
