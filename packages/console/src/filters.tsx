import { useEffect, useState } from 'preact/hooks';
import { call } from './api';
import type { Translate } from './i18n';

export interface LocationOption {
  id: string;
  name: string;
}

/** The organization's locations, for a filter and for naming a row's location (its id until loaded, or if unknown). */
export function useLocations() {
  const [locations, setLocations] = useState<LocationOption[]>([]);
  useEffect(() => {
    call<{ locations: LocationOption[] }>('GET', '/locations').then((r) => setLocations(r.locations), () => setLocations([]));
  }, []);
  return { locations, nameOf: (id: string) => locations.find((l) => l.id === id)?.name ?? id };
}

/** A list filter's location: any, or one. */
export function LocationFilter({ t, id, locations, value, onChange }: { t: Translate; id: string; locations: LocationOption[]; value: string; onChange: (value: string) => void }) {
  return (
    <div>
      <label for={id}>{t('location')}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">{t('anyLocation')}</option>
        {locations.map((l) => (
          <option key={l.id} value={l.id}>
            {l.name}
          </option>
        ))}
      </select>
    </div>
  );
}

/** A list filter's days, from and to (either may be empty), in the organization's time zone. */
export function DayRangeFilter({ t, id, from, to, onFrom, onTo }: { t: Translate; id: string; from: string; to: string; onFrom: (day: string) => void; onTo: (day: string) => void }) {
  return (
    <>
      <div>
        <label for={`${id}-from`}>{t('from')}</label>
        <input id={`${id}-from`} type="date" value={from} onInput={(e) => onFrom(e.currentTarget.value)} />
      </div>
      <div>
        <label for={`${id}-to`}>{t('to')}</label>
        <input id={`${id}-to`} type="date" value={to} onInput={(e) => onTo(e.currentTarget.value)} />
      </div>
    </>
  );
}
