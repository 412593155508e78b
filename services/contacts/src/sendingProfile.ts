import type { Directory, Organization } from './directory';
import type { MessageTemplate, Templates } from './templates';
import type { ChannelConfiguration, ChannelSettings } from './channels';

export interface SendingProfile {
  organization: Organization;
  templates: MessageTemplate[];
  channels: ChannelConfiguration[];
}

/**
 * Everything a sender needs about an organization to dispatch a step, read in one call (every start
 * asks it): the organization, then its templates and channels together, without asking again whether
 * it exists.
 */
export async function sendingProfile(parts: { directory: Directory; templates: Templates; channels: ChannelSettings }, organizationId: string): Promise<SendingProfile> {
  const organization = await parts.directory.getOrganization(organizationId);
  const [templates, channels] = await Promise.all([parts.templates.listOf(organization), parts.channels.listOf(organization.id)]);
  return { organization, templates, channels };
}
