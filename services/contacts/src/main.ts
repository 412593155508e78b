import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startContacts } from './service';

void runService({ name: 'contacts', buildConfig, start: startContacts });
