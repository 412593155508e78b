import { addressFor } from './engine';

/**
 * The addresses that identify a person within an organization: the lower-case email and the E.164
 * phone, each as the steps address them. Opt-outs and the cooldown match a person by any of them.
 */
export function personAddresses(person: { email: string; phone: string }): string[] {
  return [addressFor('EMAIL', person), addressFor('SMS', person)].filter((address) => address !== '');
}
