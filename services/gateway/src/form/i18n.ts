/** The review form's words, by organization locale (`ru` or `en`). */
export type Locale = 'ru' | 'en';

export const TEXT = {
  en: {
    title: 'How was your visit?',
    prompt: (place: string) => `How would you rate ${place}?`,
    stars: (n: number) => `${n} ${n === 1 ? 'star' : 'stars'}`,
    submit: 'Send rating',
    pickOne: 'Choose from 1 to 5 stars.',
    thanks: 'Thank you for your rating!',
    yourRating: (n: number) => `Your rating: ${n} of 5`,
    publicPrompt: 'Would you share it publicly too? It helps others choose:',
    feedbackPrompt: 'We are sorry it was not great. Tell us what went wrong; only the team will read it.',
    feedbackPlaceholder: 'What should we improve?',
    feedbackSubmit: 'Send to the team',
    feedbackThanks: 'Thank you, your message went to the team.',
    notFoundTitle: 'Link not found',
    notFound: 'This review link is not valid or has expired. Please check the link in your message.',
    csrf: 'The page expired. Please open the link again.',
    tooMany: 'Too many attempts. Please try again in a few minutes.',
    unsubscribeTitle: 'Unsubscribe',
    unsubscribePrompt: (org: string, email: string) => `Stop review requests from ${org} to ${email}?`,
    unsubscribeButton: 'Unsubscribe',
    unsubscribed: (org: string) => `You will no longer receive review requests from ${org} by email.`,
    error: 'Something went wrong. Please try again later.',
  },
  ru: {
    title: 'Как прошёл визит?',
    prompt: (place: string) => `Как вы оцените «${place}»?`,
    stars: (n: number) => `${n} ${n === 1 ? 'звезда' : n < 5 ? 'звезды' : 'звёзд'}`,
    submit: 'Отправить оценку',
    pickOne: 'Выберите от 1 до 5 звёзд.',
    thanks: 'Спасибо за оценку!',
    yourRating: (n: number) => `Ваша оценка: ${n} из 5`,
    publicPrompt: 'Поделитесь ею публично — это поможет другим сделать выбор:',
    feedbackPrompt: 'Нам жаль, что не всё понравилось. Расскажите, что пошло не так, — сообщение прочитает только команда.',
    feedbackPlaceholder: 'Что нам стоит улучшить?',
    feedbackSubmit: 'Отправить команде',
    feedbackThanks: 'Спасибо, сообщение передано команде.',
    notFoundTitle: 'Ссылка не найдена',
    notFound: 'Эта ссылка для отзыва недействительна или устарела. Проверьте ссылку в сообщении.',
    csrf: 'Страница устарела. Откройте ссылку ещё раз.',
    tooMany: 'Слишком много попыток. Попробуйте через несколько минут.',
    unsubscribeTitle: 'Отписка',
    unsubscribePrompt: (org: string, email: string) => `Больше не получать просьбы об отзыве от «${org}» на ${email}?`,
    unsubscribeButton: 'Отписаться',
    unsubscribed: (org: string) => `Вы больше не будете получать просьбы об отзыве от «${org}» по электронной почте.`,
    error: 'Что-то пошло не так. Попробуйте позже.',
  },
} as const;

export function localeOf(value: string | undefined): Locale {
  return value === 'ru' ? 'ru' : 'en';
}
