import { SYSTEM_EMAIL_SUBJECT, systemEmailBusV1, systemEmailMsgId, type contactsV1, type SystemEmailKind } from '@rrs/proto';
import { uuidv7, type Bus, type Logger } from '@rrs/runtime';

/** Where an invited person sets their password: the console's accept page. The token travels in the fragment, so it stays out of logs and Referer headers. */
export const acceptUrl = (publicBaseUrl: string, token: string) => `${publicBaseUrl.replace(/\/$/, '')}/app/#/accept/${encodeURIComponent(token)}`;

/** The console's page that sets a new password; the token travels in the fragment as for invitations. */
export const resetUrl = (publicBaseUrl: string, token: string) => `${publicBaseUrl.replace(/\/$/, '')}/app/#/reset/${encodeURIComponent(token)}`;

/**
 * The gateway's side of system emails (docs/channels.md, "System emails"): an invitation or a password
 * reset link goes on the bus (`steps.system.email`) and channel-email sends it through the same
 * providers as a cascade's emails (the dev inbox in `npm start`). The link is made here because the
 * gateway knows where the console is (PUBLIC_BASE_URL).
 */
export interface SystemEmails {
  /** True once the bus stored the email; false (logged) when it cannot now: the link is still answered where it was before. */
  invitation(input: { invitation: contactsV1.Invitation; token: string; organization: { name: string; locale: string } }): Promise<boolean>;
  passwordReset(input: { member: contactsV1.Member; token: string; expiresAt?: Date; organization: { name: string; locale: string } }): Promise<boolean>;
}

interface Email {
  id: string;
  kind: SystemEmailKind;
  to: string;
  link: string;
  organizationId: string;
  organization: { name: string; locale: string };
  expiresAt?: Date;
  role?: string;
}

export function busSystemEmails(bus: Bus | undefined, publicBaseUrl: string, logger: Logger): SystemEmails {
  const publish = async (email: Email): Promise<boolean> => {
    if (!bus || !bus.isConnected()) {
      logger.warn({ kind: email.kind, id: email.id }, 'system email not queued: no bus connection');
      return false;
    }
    const data = systemEmailBusV1.SystemEmail.encode(systemEmailBusV1.SystemEmail.fromPartial({
      id: email.id, kind: email.kind, to: email.to, locale: email.organization.locale, link: email.link,
      organizationId: email.organizationId, organizationName: email.organization.name, expiresAt: email.expiresAt, role: email.role ?? '',
    })).finish();
    try {
      await bus.publish(SYSTEM_EMAIL_SUBJECT, data, { msgId: systemEmailMsgId(email.id) });
      return true;
    } catch (err) {
      logger.warn({ err, kind: email.kind, id: email.id }, 'system email not queued');
      return false;
    }
  };
  return {
    invitation: ({ invitation, token, organization }) =>
      publish({ id: invitation.id, kind: 'invitation', to: invitation.email, link: acceptUrl(publicBaseUrl, token), organizationId: invitation.organizationId, organization, expiresAt: invitation.expiresAt, role: invitation.role }),
    // A reset has no id of its own outside contacts: each link is one email.
    passwordReset: ({ member, token, expiresAt, organization }) =>
      publish({ id: uuidv7(), kind: 'password_reset', to: member.email, link: resetUrl(publicBaseUrl, token), organizationId: member.organizationId, organization, expiresAt }),
  };
}
