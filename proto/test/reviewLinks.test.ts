import { isReviewPlatformId, reviewLinkOf } from '../src/reviewLinks';

describe('review link builders', () => {
  it("builds Google's write-a-review link from a Place ID", () => {
    expect(reviewLinkOf('google', ' ChIJLU7jZClu5kcR4PcOOO6p3I0 ')).toBe('https://search.google.com/local/writereview?placeid=ChIJLU7jZClu5kcR4PcOOO6p3I0');
  });

  it("builds the Yandex Maps organization's reviews link and the 2GIS firm's reviews link from their numeric ids", () => {
    expect(reviewLinkOf('yandex', '1124715036')).toBe('https://yandex.ru/maps/org/1124715036/reviews/');
    expect(reviewLinkOf('2gis', '70000001000000001')).toBe('https://2gis.ru/firm/70000001000000001/tab/reviews');
  });

  it('builds nothing from what is not an id of that platform', () => {
    expect(reviewLinkOf('google', 'short')).toBeNull();
    expect(reviewLinkOf('google', 'ChIJ/../evil?x=1')).toBeNull();
    expect(reviewLinkOf('yandex', 'acme-dental')).toBeNull();
    expect(reviewLinkOf('2gis', '123/../../x')).toBeNull();
    expect(reviewLinkOf('2gis', '')).toBeNull();
    expect(isReviewPlatformId('yandex', '42')).toBe(true);
  });
});
